// Ponder app for the peer benchmark (scripts/peers/ponder.py): one chain, one contract
// `Token` = the 50 ERC-20 contracts 0x00..00 .. 0x00..31 of the test chain, Transfer events
// from PONDER_START_BLOCK to PONDER_END_BLOCK. Everything comes from the environment so the
// same files serve every run; DATABASE_URL (PostgreSQL) is read by Ponder itself.
import { createConfig } from "ponder";

// ERC-20 Transfer(address indexed from, address indexed to, uint256 value)
const erc20TransferAbi = [
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256", indexed: false },
    ],
    anonymous: false,
  },
] as const;

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
}

// The chain's contracts, as the bench server lists them (its "contracts").
const addresses = env("PONDER_CONTRACTS")
  .split(",")
  .map((a) => a as `0x${string}`);

export default createConfig({
  database: { kind: "postgres", connectionString: env("DATABASE_URL") },
  // Ponder's defaults otherwise: HTTP transport (so new blocks are found by polling, every
  // 1 s), eth_getLogs ranges sized by Ponder itself, RPC request cache on (ponder_sync schema
  // in the same fresh database), multichain ordering.
  chains: {
    bench: {
      id: Number(env("PONDER_CHAIN_ID")),
      rpc: env("PONDER_RPC_URL"),
    },
  },
  contracts: {
    Token: {
      chain: "bench",
      abi: erc20TransferAbi,
      address: addresses,
      startBlock: Number(env("PONDER_START_BLOCK")),
      endBlock: Number(env("PONDER_END_BLOCK")),
    },
  },
});
