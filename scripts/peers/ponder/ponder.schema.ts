import { onchainTable } from "ponder";

// One row per Transfer log. Ponder names the columns in snake_case (blockNumber -> block_number).
export const transfer = onchainTable("transfer", (t) => ({
  id: t.text().primaryKey(), // event.id: Ponder's unique id of the log event
  blockNumber: t.bigint().notNull(),
  logIndex: t.integer().notNull(),
  transactionIndex: t.integer().notNull(),
  transactionHash: t.hex().notNull(),
  txFrom: t.hex().notNull(), // event.transaction.from: the sender Ponder stored
  address: t.hex().notNull(), // event.log.address: the emitting contract
  from: t.hex().notNull(),
  to: t.hex().notNull(),
  value: t.bigint().notNull(),
}));
