import { ponder } from "ponder:registry";
import { transfer } from "ponder:schema";

ponder.on("Token:Transfer", async ({ event, context }) => {
  await context.db.insert(transfer).values({
    id: event.id,
    blockNumber: event.block.number,
    logIndex: event.log.logIndex,
    transactionIndex: event.transaction.transactionIndex,
    transactionHash: event.transaction.hash,
    txFrom: event.transaction.from,
    address: event.log.address,
    from: event.args.from,
    to: event.args.to,
    value: event.args.value,
  });
});
