'use strict'
// Hand-written migration (what `sqd codegen` + `sqd migration:generate` would produce for the model in
// lib/model): the two tables, primary keys only, no secondary indexes.
module.exports = class Data1700000000000 {
    name = 'Data1700000000000'

    async up(db) {
        await db.query(`CREATE TABLE "transaction" ("id" text NOT NULL, "block_number" integer NOT NULL, "transaction_index" integer NOT NULL, "hash" text NOT NULL, "sender" text NOT NULL, CONSTRAINT "PK_transaction" PRIMARY KEY ("id"))`)
        await db.query(`CREATE TABLE "log" ("id" text NOT NULL, "block_number" integer NOT NULL, "log_index" integer NOT NULL, "transaction_index" integer NOT NULL, "address" text NOT NULL, "topics" text array NOT NULL, "data" text NOT NULL, CONSTRAINT "PK_log" PRIMARY KEY ("id"))`)
    }

    async down(db) {
        await db.query(`DROP TABLE "log"`)
        await db.query(`DROP TABLE "transaction"`)
    }
}
