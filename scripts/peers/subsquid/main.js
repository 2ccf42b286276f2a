'use strict'
// Subsquid (SQD) squid for the peer benchmark: every transaction and every log of a block range, read
// from a plain JSON-RPC node (no SQD Network / archive gateway), written into PostgreSQL with
// @subsquid/typeorm-store. Plain CommonJS: no TypeScript build step.
//
// Environment (set by scripts/peers/subsquid.py):
//   SQD_RPC_URL        JSON-RPC endpoint
//   SQD_FROM, SQD_TO   inclusive block range
//   DB_URL             postgres://... (read by @subsquid/typeorm-config, as in any squid)
// The working directory must be the install root: @subsquid/typeorm-config loads ./lib/model and
// ./db/migrations/*.js from it.
//
// Batching / concurrency (all of it the processor's defaults, nothing tuned):
// * RPC client: at most 10 requests in flight (`capacity`), JSON-RPC batches of at most 100 calls
//   (`maxBatchCallSize`), 30 s request timeout, no rate limit (`rateLimit` left unset), endless retries.
// * Historical ("cold", finalized) ingestion cuts the range into splits of 10 blocks and fetches up to
//   min(5, capacity) = 5 splits at once. A split is one JSON-RPC batch of 10 eth_getBlockByNumber(n, true)
//   plus one eth_getLogs {fromBlock, toBlock} over the 10 blocks (no receipts: no receipt field is
//   selected). Splits are handed to the handler in order, one database transaction per split
//   (SERIALIZABLE, the store's default), which writes with multi-row INSERTs of up to 1000 rows.
// * Finality confirmation 0: the benchmark chain is static and fully final, which is how a historical
//   backfill sees blocks far below the head. With 0 every block goes through the cold path above and
//   the processor stops by itself at SQD_TO. (With N > 0 the last N blocks of a chain whose head does not
//   move would stay "hot" and never finalize, and the processor would poll the head forever.)
const {EvmBatchProcessor} = require('@subsquid/evm-processor')
const {TypeormDatabase} = require('@subsquid/typeorm-store')
const {createOrmConfig} = require('@subsquid/typeorm-config')
const {DataSource} = require('typeorm')
const {Transaction, Log} = require('./lib/entities')

function env(name) {
    const v = process.env[name]
    if (!v) throw new Error(`${name} is not set`)
    return v
}

const RPC_URL = env('SQD_RPC_URL')
const FROM = parseInt(env('SQD_FROM'), 10)
const TO = parseInt(env('SQD_TO'), 10)

const processor = new EvmBatchProcessor()
    .setRpcEndpoint({
        url: RPC_URL,
        rateLimit: undefined, // no rate limit
    })
    .setFinalityConfirmation(0)
    .setBlockRange({from: FROM, to: TO})
    .setFields({
        // transactionIndex (tx) and logIndex/transactionIndex (log) are always included; named here anyway
        transaction: {hash: true, from: true, transactionIndex: true},
        log: {address: true, topics: true, data: true, transactionIndex: true, logIndex: true},
    })
    .addTransaction({}) // every transaction
    .addLog({}) // every log

// What `sqd migration:apply` does: apply db/migrations/*.js (the hand-written migration) to DB_URL.
async function migrate() {
    const ds = new DataSource({...createOrmConfig(), synchronize: false, migrationsRun: false, logging: false})
    await ds.initialize()
    try {
        await ds.runMigrations({transaction: 'all'})
    } finally {
        await ds.destroy()
    }
}

async function handle(ctx) {
    const txs = []
    const logs = []
    for (const block of ctx.blocks) {
        const height = block.header.height
        for (const tx of block.transactions) {
            txs.push(new Transaction({
                id: tx.id,
                blockNumber: height,
                transactionIndex: tx.transactionIndex,
                hash: tx.hash,
                sender: tx.from,
            }))
        }
        for (const log of block.logs) {
            logs.push(new Log({
                id: log.id,
                blockNumber: height,
                logIndex: log.logIndex,
                transactionIndex: log.transactionIndex,
                address: log.address,
                topics: log.topics,
                data: log.data,
            }))
        }
    }
    await ctx.store.insert(txs)
    await ctx.store.insert(logs)
}

migrate().then(
    // run() exits the process itself: 0 once the block range is done, 1 on an error
    () => processor.run(new TypeormDatabase(), handle),
    err => {
        console.error(err)
        process.exit(1)
    }
)
