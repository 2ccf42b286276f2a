'use strict'
// The squid's data model, in plain JavaScript (no TypeScript, no decorators, no codegen).
// @subsquid/typeorm-config loads `<project>/lib/model` as the TypeORM entity list; TypeORM takes the
// EntitySchema instances exported here. @subsquid/typeorm-store's Store finds an entity's metadata by the
// object's constructor, so every schema has a `target` class and rows are instances of these classes.
// The tables themselves are created by the hand-written migration in db/migrations/.
const {EntitySchema} = require('typeorm')
const {Transaction, Log} = require('../entities')

const TransactionSchema = new EntitySchema({
    name: 'Transaction',
    target: Transaction,
    tableName: 'transaction',
    columns: {
        id: {type: 'text', primary: true},
        blockNumber: {type: 'integer', name: 'block_number'},
        transactionIndex: {type: 'integer', name: 'transaction_index'},
        hash: {type: 'text'},
        sender: {type: 'text'},
    },
})

const LogSchema = new EntitySchema({
    name: 'Log',
    target: Log,
    tableName: 'log',
    columns: {
        id: {type: 'text', primary: true},
        blockNumber: {type: 'integer', name: 'block_number'},
        logIndex: {type: 'integer', name: 'log_index'},
        transactionIndex: {type: 'integer', name: 'transaction_index'},
        address: {type: 'text'},
        topics: {type: 'text', array: true},
        data: {type: 'text'},
    },
})

module.exports = {TransactionSchema, LogSchema}
