'use strict'
// Plain classes the rows are made of; lib/model/index.js maps them onto the tables.
class Transaction {
    constructor(props) { Object.assign(this, props) }
}

class Log {
    constructor(props) { Object.assign(this, props) }
}

module.exports = {Transaction, Log}
