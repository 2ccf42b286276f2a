//! The tables the pipeline fills, each described once: its columns in COPY
//! order, how one block's rows are encoded, that a reorg rollback deletes
//! from it, and the lookup indexes a bulk load may defer. Writing, rolling
//! back, replacing a block, `status` and the deferred index build all read
//! [`TABLES`] (reth's `tables!` list plays the same part), so a new table
//! is one [`Table`] here, its entry in `TABLES`, and its migration.
//!
//! Decoded event tables (`[[events]]`) are described the same way, at
//! start, from the configuration (see `events`).
//!
//! This module builds bytes and names; it runs no statement itself.

use super::copy::CopyBuf;
use super::events::EventTable;
use super::{Result, StoreError};
use crate::block::Block;
use crate::chain::SenderSource;
use crate::decode::{ChainFields, Log, U256};

/// One table keyed by block number.
pub struct Table {
    pub name: &'static str,
    /// The column holding the block number: what a rollback, a replaced
    /// block and `status` select by.
    pub block_column: &'static str,
    /// Columns in the order [`Table::encode`] writes them.
    pub columns: &'static [&'static str],
    /// Indexes a bulk load drops and builds at its end (see `indexes`):
    /// those users query by (an optional one only where the setting names
    /// it), and the table's primary key where exactly-once does not rest on
    /// it (every table but `blocks`: a block's rows are written in the
    /// transaction that inserts its `blocks` row, whose key stays, so they
    /// cannot be written twice).
    pub lookup_indexes: &'static [LookupIndex],
    /// How one block's rows are made.
    pub rows: Rows,
}

/// How a table's rows are made from a block.
pub enum Rows {
    /// A table of the schema: its encoder.
    Fixed(fn(&Block, &mut CopyBuf) -> Result<()>),
    /// A decoded event table (`[[events]]`, see `events`).
    Event(Box<EventTable>),
}

/// A B-tree index on some columns of its table: a plain one, or the
/// table's primary key.
pub struct LookupIndex {
    pub name: &'static str,
    /// The indexed columns, as written in `CREATE INDEX … (columns)`.
    pub columns: &'static str,
    /// The table's primary key (a constraint, not only an index).
    pub primary: bool,
    /// Built only when `index.optional_indexes` names it (no migration
    /// creates it): an index some users query by and most pay for.
    pub optional: bool,
}

/// Every table the pipeline fills, in the order a write fills them.
pub static TABLES: [&Table; 4] = [&BLOCKS, &TRANSACTIONS, &AUTHORIZATIONS, &LOGS];

/// The optional lookup indexes (built only where `index.optional_indexes`
/// names them), by name.
pub fn optional_indexes() -> impl Iterator<Item = &'static str> {
    TABLES
        .iter()
        .flat_map(|t| t.lookup_indexes)
        .filter(|i| i.optional)
        .map(|i| i.name)
}

impl Table {
    /// Appends one block's rows (none is fine).
    pub fn encode(&self, block: &Block, out: &mut CopyBuf) -> Result<()> {
        match &self.rows {
            Rows::Fixed(encode) => encode(block, out),
            Rows::Event(event) => event.encode(block, out),
        }
    }

    /// The binary COPY statement for [`Table::columns`].
    pub fn copy_statement(&self) -> String {
        self.copy_statement_into(self.name)
    }

    /// The same into `target`: the table or one of its partitions.
    pub fn copy_statement_into(&self, target: &str) -> String {
        format!(
            "COPY {target} ({}) FROM STDIN (FORMAT binary)",
            self.columns.join(", ")
        )
    }
}

impl LookupIndex {
    /// Its definition on `table`, as the migrations create it. A primary
    /// key has no `IF NOT EXISTS`: the caller checks first.
    pub fn create_statement(&self, table: &Table) -> String {
        self.create_on("", table.name, self.name)
    }

    /// The partitioned `table`'s own index, invalid until every
    /// partition's is attached to it.
    pub fn create_on_only_statement(&self, table: &Table) -> String {
        self.create_on("ONLY ", table.name, self.name)
    }

    /// Its name on `partition` of `table`: the partition's name and the
    /// index's own suffix (`logs_p3` + `_pkey`), cut to 63 bytes as
    /// PostgreSQL cuts identifiers.
    pub fn partition_index_name(&self, table: &Table, partition: &str) -> String {
        let tag = self.name.strip_prefix(table.name).unwrap_or(self.name);
        let mut child = format!("{partition}{tag}");
        child.truncate(63);
        child
    }

    /// The sort of it on one partition, under the name
    /// [`LookupIndex::partition_index_name`]: a key as a plain unique
    /// index (made the partition's key afterwards, `USING INDEX`), so that
    /// it takes only a share lock on the partition, as a lookup index does.
    pub fn sort_on_partition_statement(&self, table: &Table, partition: &str) -> String {
        let unique = if self.primary { "UNIQUE " } else { "" };
        format!(
            "CREATE {unique}INDEX IF NOT EXISTS {} ON {partition} ({})",
            self.partition_index_name(table, partition),
            self.columns
        )
    }

    fn create_on(&self, only: &str, relation: &str, name: &str) -> String {
        let columns = self.columns;
        if self.primary {
            format!("ALTER TABLE {only}{relation} ADD CONSTRAINT {name} PRIMARY KEY ({columns})")
        } else {
            format!("CREATE INDEX IF NOT EXISTS {name} ON {only}{relation} ({columns})")
        }
    }

    /// Drops it from `table` and every partition (none is fine).
    pub fn drop_statement(&self, table: &Table) -> String {
        if self.primary {
            format!(
                "ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}",
                table.name, self.name
            )
        } else {
            format!("DROP INDEX IF EXISTS {}", self.name)
        }
    }
}

pub static BLOCKS: Table = Table {
    name: "blocks",
    block_column: "number",
    columns: &[
        "number",
        "hash",
        "parent_hash",
        "timestamp",
        "tx_count",
        "verified",
        "timestamp_seconds",
        "l1_block_number",
    ],
    lookup_indexes: &[],
    rows: Rows::Fixed(|block, out| {
        let h = &block.header;
        let tx_count = i32::try_from(block.txs.len())
            .map_err(|_| out_of_range(h.number, "tx_count", block.txs.len()))?;
        out.row()
            .i64(block_number(block)?)
            .bytes(&h.hash)
            .bytes(&h.parent_hash)
            .timestamp(h.timestamp)
            .i32(tx_count)
            .text(block.verified.as_str())
            .numeric(&U256::from_u64(h.timestamp));
        opt_bigint(out, block, "l1BlockNumber", block.l1_block_number)
    }),
};

pub static TRANSACTIONS: Table = Table {
    name: "transactions",
    block_column: "block_number",
    columns: &[
        "block_number",
        "tx_index",
        "hash",
        "tx_type",
        "sender",
        "node_from",
        "from_matches",
        "to_address",
        "nonce",
        "value",
        "error",
        "status",
        "gas_used",
        "effective_gas_price",
        "contract_address",
        "gas_limit",
        "gas_price",
        "max_fee_per_gas",
        "max_priority_fee_per_gas",
        "input_selector",
        "sender_source",
        "source_hash",
        "mint",
        "is_system_tx",
        "l1_fee",
        "l1_gas_used",
        "l1_gas_price",
        "gas_used_for_l1",
    ],
    lookup_indexes: &[
        LookupIndex {
            name: "transactions_sender_idx",
            columns: "sender",
            optional: false,
            primary: false,
        },
        LookupIndex {
            name: "transactions_hash_idx",
            columns: "hash",
            optional: false,
            primary: false,
        },
        LookupIndex {
            name: "transactions_pkey",
            columns: "block_number, tx_index",
            optional: false,
            primary: true,
        },
    ],
    rows: Rows::Fixed(|block, t| {
        let number = block_number(block)?;
        for (i, rtx) in block.txs.iter().enumerate() {
            let tx = &rtx.tx;
            let sender = rtx.recovered.sender.as_ref().ok();
            t.row().i64(number).i32(i as i32);
            // The pipeline refuses transactions without a hash before here.
            t.bytes(tx.hash.as_ref().map_or(&[][..], |h| &h[..]));
            t.i16(tx.tx_type as i16);
            t.opt_bytes(sender.map(|s| &s[..]));
            t.opt_bytes(tx.from.as_ref().map(|f| &f[..]));
            // Whether the sender we checked equals the node's `from`: only
            // a recovered sender is compared (a committed one is `from`).
            match (sender, &tx.from, rtx.recovered.source) {
                (Some(s), Some(f), SenderSource::Recovered) => t.bool(s == f),
                _ => t.null(),
            };
            t.opt_bytes(tx.to.as_ref().map(|x| &x[..]));
            match tx.nonce {
                Some(n) => t.numeric(&U256::from_u64(n)),
                None => t.null(),
            };
            match &tx.value {
                Some(v) => t.numeric(v),
                None => t.null(),
            };
            match &rtx.recovered.sender {
                Err(e) => t.text(&e.to_string()),
                Ok(_) => t.null(),
            };
            let receipt = rtx.receipt.as_ref();
            match receipt.and_then(|r| r.status) {
                Some(s) => t.i16(s.into()),
                None => t.null(),
            };
            opt_bigint(t, block, "gasUsed", receipt.and_then(|r| r.gas_used))?;
            opt_numeric(t, receipt.and_then(|r| r.effective_gas_price.as_ref()));
            t.opt_bytes(
                receipt
                    .and_then(|r| r.contract_address.as_ref())
                    .map(|a| &a[..]),
            );
            opt_numeric(t, tx.gas.as_ref());
            opt_numeric(t, tx.gas_price.as_ref());
            opt_numeric(t, tx.max_fee_per_gas.as_ref());
            opt_numeric(t, tx.max_priority_fee_per_gas.as_ref());
            t.opt_bytes(tx.input.get(..4));
            t.text(rtx.recovered.source.as_str());
            let deposit = match tx.chain.as_deref() {
                Some(ChainFields::OpDeposit(d)) => Some(d),
                _ => None,
            };
            t.opt_bytes(deposit.and_then(|d| d.source_hash.as_ref()).map(|h| &h[..]));
            match deposit {
                Some(d) => t.numeric(d.mint.as_ref().unwrap_or(&U256::ZERO)),
                None => t.null(),
            };
            match deposit {
                Some(d) => t.bool(d.is_system_tx),
                None => t.null(),
            };
            // As the node reports them (see `L1Costs`).
            let l1 = receipt.and_then(|r| r.l1_costs.as_deref());
            opt_numeric(t, l1.and_then(|c| c.l1_fee.as_ref()));
            opt_numeric(t, l1.and_then(|c| c.l1_gas_used.as_ref()));
            opt_numeric(t, l1.and_then(|c| c.l1_gas_price.as_ref()));
            opt_bigint(t, block, "gasUsedForL1", l1.and_then(|c| c.gas_used_for_l1))?;
        }
        Ok(())
    }),
};

pub static LOGS: Table = Table {
    name: "logs",
    block_column: "block_number",
    columns: &[
        "block_number",
        "log_index",
        "tx_index",
        "address",
        "topic0",
        "topic1",
        "topic2",
        "topic3",
        "data",
    ],
    lookup_indexes: &[
        LookupIndex {
            name: "logs_address_topic0_idx",
            columns: "address, topic0",
            optional: false,
            primary: false,
        },
        LookupIndex {
            name: "logs_topic0_idx",
            columns: "topic0",
            optional: true,
            primary: false,
        },
        LookupIndex {
            name: "logs_pkey",
            columns: "block_number, log_index",
            optional: false,
            primary: true,
        },
    ],
    rows: Rows::Fixed(|block, l| {
        let number = block_number(block)?;
        for log in &block.logs {
            let (index, tx_index) = log_indexes(block.header.number, log)?;
            l.row()
                .i64(number)
                .i32(index)
                .i32(tx_index)
                .bytes(&log.address);
            for k in 0..4 {
                l.opt_bytes(log.topics.get(k).map(|t| &t[..]));
            }
            l.bytes(&log.data);
        }
        Ok(())
    }),
};

/// A u64 the protocol keeps below 2^63 (gas by EIP-1985, block numbers)
/// into a `BIGINT`; one that is not stops the write naming the block and
/// the field.
fn opt_bigint(out: &mut CopyBuf, block: &Block, field: &'static str, v: Option<u64>) -> Result<()> {
    match v {
        Some(g) => {
            let g = i64::try_from(g).map_err(|_| out_of_range(block.header.number, field, g))?;
            out.i64(g)
        }
        None => out.null(),
    };
    Ok(())
}

fn opt_numeric(out: &mut CopyBuf, v: Option<&U256>) {
    match v {
        Some(v) => out.numeric(v),
        None => out.null(),
    };
}

pub static AUTHORIZATIONS: Table = Table {
    name: "authorizations",
    block_column: "block_number",
    columns: &[
        "block_number",
        "tx_index",
        "auth_index",
        "chain_id",
        "address",
        "nonce",
        "authority",
        "error",
        "valid",
        "invalid_reason",
    ],
    lookup_indexes: &[
        LookupIndex {
            name: "authorizations_authority_idx",
            columns: "authority",
            optional: false,
            primary: false,
        },
        LookupIndex {
            name: "authorizations_pkey",
            columns: "block_number, tx_index, auth_index",
            optional: false,
            primary: true,
        },
    ],
    rows: Rows::Fixed(|block, a| {
        let number = block_number(block)?;
        for (i, rtx) in block.txs.iter().enumerate() {
            let auths = &rtx.tx.authorization_list;
            let (authorities, voids) = (&rtx.recovered.authorities, &rtx.void_authorizations);
            if authorities.len() != auths.len() || voids.len() != auths.len() {
                return Err(StoreError::Unchecked {
                    number: block.header.number,
                    what: "an authorization's authority or validity",
                });
            }
            for (j, ((auth, authority), void)) in
                auths.iter().zip(authorities).zip(voids).enumerate()
            {
                a.row().i64(number).i32(i as i32).i32(j as i32);
                match &auth.chain_id {
                    Some(c) => a.numeric(c),
                    None => a.null(),
                };
                a.opt_bytes(auth.address.as_ref().map(|x| &x[..]));
                match auth.nonce {
                    Some(n) => a.numeric(&U256::from_u64(n)),
                    None => a.null(),
                };
                a.opt_bytes(authority.as_ref().ok().map(|x| &x[..]));
                match authority {
                    Err(e) => a.text(&e.to_string()),
                    Ok(_) => a.null(),
                };
                a.bool(void.is_none());
                match void {
                    Some(reason) => a.text(reason),
                    None => a.null(),
                };
            }
        }
        Ok(())
    }),
};

/// A log's `log_index` and `tx_index` columns, as PostgreSQL's `INT`.
pub(super) fn log_indexes(number: u64, log: &Log) -> Result<(i32, i32)> {
    let index = i32::try_from(log.log_index)
        .map_err(|_| out_of_range(number, "logIndex", log.log_index))?;
    let tx = log.transaction_index.unwrap_or_default();
    let tx = i32::try_from(tx).map_err(|_| out_of_range(number, "transactionIndex", tx))?;
    Ok((index, tx))
}

/// The block number as PostgreSQL's `BIGINT`.
pub(super) fn block_number(block: &Block) -> Result<i64> {
    let n = block.header.number;
    i64::try_from(n).map_err(|_| out_of_range(n, "number", n))
}

pub(super) fn out_of_range(number: u64, field: &'static str, value: impl ToString) -> StoreError {
    StoreError::OutOfRange {
        number,
        field,
        value: value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_keyed_by_its_block_column_first() {
        for t in TABLES {
            assert_eq!(t.columns[0], t.block_column, "{}", t.name);
            for i in t.lookup_indexes {
                assert!(i.name.starts_with(t.name), "{} on {}", i.name, t.name);
                for c in i.columns.split(", ") {
                    assert!(t.columns.contains(&c), "{} on {}", i.name, t.name);
                }
            }
        }
        assert_eq!(
            LOGS.copy_statement(),
            "COPY logs (block_number, log_index, tx_index, address, topic0, topic1, topic2, topic3, data) FROM STDIN (FORMAT binary)"
        );
        assert_eq!(optional_indexes().collect::<Vec<_>>(), ["logs_topic0_idx"]);
        assert_eq!(
            AUTHORIZATIONS.lookup_indexes[0].create_statement(&AUTHORIZATIONS),
            "CREATE INDEX IF NOT EXISTS authorizations_authority_idx ON authorizations (authority)"
        );
        assert_eq!(
            LOGS.lookup_indexes[2].create_on_only_statement(&LOGS),
            "ALTER TABLE ONLY logs ADD CONSTRAINT logs_pkey PRIMARY KEY (block_number, log_index)"
        );
        assert_eq!(
            LOGS.lookup_indexes[2].drop_statement(&LOGS),
            "ALTER TABLE logs DROP CONSTRAINT IF EXISTS logs_pkey"
        );
        // Every table but `blocks` defers its key; `blocks` keeps exactly-once.
        for t in TABLES {
            let keys = t.lookup_indexes.iter().filter(|i| i.primary).count();
            assert_eq!(keys, usize::from(t.name != "blocks"), "{}", t.name);
        }
    }
}
