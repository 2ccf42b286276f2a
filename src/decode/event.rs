//! Event logs decoded by their Solidity signature (`[[events]]`), with
//! alloy's parser and ABI decoder (`alloy-json-abi`, `alloy-dyn-abi`):
//! which logs an event matches, the column each parameter becomes, and a
//! log's values in those columns. No I/O and no SQL text: the store names
//! and creates the tables (`store::events`).
//!
//! A log matches when its first topic is the event's selector and it has
//! one topic per indexed parameter more, so an ERC-20 `Transfer` (two
//! indexed) and an ERC-721 `Transfer` (three) are told apart. A matching
//! log whose data does not decode is an error for the caller to count,
//! never a reason to stop.

use alloy_dyn_abi::{DynSolEvent, DynSolType, DynSolValue, Specifier as _};
use alloy_json_abi::Event;
use alloy_primitives::B256 as AlloyB256;

use super::{B256, Log, U256, hex0x};

/// The PostgreSQL column a parameter is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// `address`, `bytes`, `bytesN`, `function`, and the topic hash of an
    /// indexed dynamic parameter.
    Bytea,
    Boolean,
    /// `intN` and `uintN`: exact, signed.
    Numeric,
    /// `string`.
    Text,
    /// Arrays and tuples.
    Jsonb,
}

impl ColumnKind {
    pub fn sql_type(self) -> &'static str {
        match self {
            ColumnKind::Bytea => "BYTEA",
            ColumnKind::Boolean => "BOOLEAN",
            ColumnKind::Numeric => "NUMERIC(78,0)",
            ColumnKind::Text => "TEXT",
            ColumnKind::Jsonb => "JSONB",
        }
    }
}

/// One decoded value, ready for its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Bytes(Vec<u8>),
    Bool(bool),
    /// Sign and magnitude: `int256` runs from -2^255.
    Numeric {
        negative: bool,
        magnitude: U256,
    },
    Text(String),
    /// JSON text: addresses and bytes as 0x-hex strings, integers as
    /// decimal strings (JSON numbers lose precision past 2^53).
    Json(String),
}

/// A parameter: its column name (as in the signature; `argN` when
/// unnamed), type and whether it is indexed.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub kind: ColumnKind,
    pub indexed: bool,
}

/// An event signature, parsed once.
#[derive(Debug, Clone)]
pub struct EventSpec {
    /// The event's name, as in the signature.
    pub name: String,
    /// The canonical full signature, names and `indexed` included: what a
    /// table is recorded as created for.
    pub full_signature: String,
    pub topic0: B256,
    pub params: Vec<Param>,
    decoder: DynSolEvent,
}

/// A signature that cannot be indexed.
#[derive(Debug, thiserror::Error)]
#[error("event signature {signature:?}: {reason}")]
pub struct SignatureError {
    pub signature: String,
    pub reason: String,
}

impl EventSpec {
    /// Parses a human-readable signature: `Transfer(address indexed from,
    /// address indexed to, uint256 value)` (a leading `event` is allowed).
    pub fn parse(signature: &str) -> Result<EventSpec, SignatureError> {
        let fail = |reason: String| SignatureError {
            signature: signature.to_owned(),
            reason,
        };
        let event = Event::parse(signature.trim()).map_err(|e| fail(e.to_string()))?;
        if event.anonymous {
            return Err(fail(
                "anonymous events have no selector topic to match logs by".into(),
            ));
        }
        let decoder = event.resolve().map_err(|e| fail(e.to_string()))?;
        let mut params = Vec::with_capacity(event.inputs.len());
        for (i, p) in event.inputs.iter().enumerate() {
            let ty = p.resolve().map_err(|e| fail(e.to_string()))?;
            let composite = matches!(
                ty,
                DynSolType::String
                    | DynSolType::Bytes
                    | DynSolType::Array(_)
                    | DynSolType::FixedArray(..)
                    | DynSolType::Tuple(_)
            );
            let kind = match ty {
                // Indexed reference types are stored as their keccak hash.
                _ if p.indexed && composite => ColumnKind::Bytea,
                DynSolType::Bool => ColumnKind::Boolean,
                DynSolType::Int(_) | DynSolType::Uint(_) => ColumnKind::Numeric,
                DynSolType::String => ColumnKind::Text,
                DynSolType::Array(_) | DynSolType::FixedArray(..) | DynSolType::Tuple(_) => {
                    ColumnKind::Jsonb
                }
                _ => ColumnKind::Bytea,
            };
            let name = if p.name.is_empty() {
                format!("arg{i}")
            } else {
                p.name.clone()
            };
            params.push(Param {
                name,
                kind,
                indexed: p.indexed,
            });
        }
        Ok(EventSpec {
            name: event.name.clone(),
            full_signature: event.full_signature(),
            topic0: event.selector().0,
            params,
            decoder,
        })
    }

    /// Topics a matching log has: the selector and one per indexed
    /// parameter.
    pub fn topic_count(&self) -> usize {
        1 + self.params.iter().filter(|p| p.indexed).count()
    }

    /// Whether `log` is this event: its selector, and as many topics.
    pub fn matches(&self, log: &Log) -> bool {
        log.topics.first() == Some(&self.topic0) && log.topics.len() == self.topic_count()
    }

    /// The values of a log that [`matches`](Self::matches), one per
    /// parameter in signature order; why not, when its data does not
    /// decode (short data, a `bool` that is not 0 or 1, trailing bytes, …).
    pub fn decode(&self, log: &Log) -> Result<Vec<Value>, String> {
        let topics = log.topics.iter().map(|t| AlloyB256::from(*t));
        let decoded = self
            .decoder
            .decode_log_parts(topics, &log.data)
            .map_err(|e| e.to_string())?;
        // The decoder reads a `bool` word of 2 as true and ignores dirty
        // high bytes of an address; a log is stored only if it is exactly
        // what encoding its values gives back.
        let canonical = DynSolValue::Tuple(decoded.body.clone()).abi_encode_params();
        if canonical != log.data {
            return Err(format!(
                "data ({} bytes) is not the ABI encoding of the values it decodes to",
                log.data.len()
            ));
        }
        let (mut indexed, mut body) = (decoded.indexed.into_iter(), decoded.body.into_iter());
        self.params
            .iter()
            .map(|p| {
                let v = if p.indexed {
                    indexed.next()
                } else {
                    body.next()
                };
                v.map(column)
                    .ok_or_else(|| "fewer values than parameters".to_owned())
            })
            .collect()
    }
}

/// A decoded value in its column's form.
fn column(v: DynSolValue) -> Value {
    match v {
        DynSolValue::Address(a) => Value::Bytes(a.to_vec()),
        DynSolValue::Bool(b) => Value::Bool(b),
        DynSolValue::Int(i, _) => Value::Numeric {
            negative: i.is_negative(),
            magnitude: U256(i.unsigned_abs().to_be_bytes::<32>()),
        },
        DynSolValue::Uint(u, _) => Value::Numeric {
            negative: false,
            magnitude: U256(u.to_be_bytes::<32>()),
        },
        DynSolValue::FixedBytes(w, n) => Value::Bytes(w[..n.min(32)].to_vec()),
        DynSolValue::Function(f) => Value::Bytes(f.to_vec()),
        DynSolValue::Bytes(b) => Value::Bytes(b),
        // PostgreSQL's TEXT holds no NUL character.
        DynSolValue::String(s) => Value::Text(s.replace('\0', "\u{fffd}")),
        other => Value::Json(json(&other).to_string()),
    }
}

/// Arrays and tuples as JSON; PostgreSQL's JSONB holds no `\u0000` either.
fn json(v: &DynSolValue) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        DynSolValue::Address(a) => J::String(hex0x(a.as_slice())),
        DynSolValue::Bool(b) => J::Bool(*b),
        DynSolValue::Int(i, _) => J::String(i.to_string()),
        DynSolValue::Uint(u, _) => J::String(u.to_string()),
        DynSolValue::FixedBytes(w, n) => J::String(hex0x(&w[..(*n).min(32)])),
        DynSolValue::Function(f) => J::String(hex0x(f.as_slice())),
        DynSolValue::Bytes(b) => J::String(hex0x(b)),
        DynSolValue::String(s) => J::String(s.replace('\0', "\u{fffd}")),
        DynSolValue::Array(xs) | DynSolValue::FixedArray(xs) | DynSolValue::Tuple(xs) => {
            J::Array(xs.iter().map(json).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{Address as AAddress, I256, U256 as AU256, keccak256};

    /// A log of `spec` with `values` (signature order), encoded by alloy's
    /// encoder, independently of the decoder under test.
    fn encode(spec: &EventSpec, values: Vec<DynSolValue>) -> Log {
        let mut topics = vec![spec.topic0];
        let mut body = Vec::new();
        for (p, v) in spec.params.iter().zip(values) {
            if p.indexed {
                let word = match &v {
                    DynSolValue::String(s) => keccak256(s.as_bytes()).0,
                    DynSolValue::Bytes(b) => keccak256(b).0,
                    other => {
                        let enc = other.abi_encode();
                        if matches!(other, DynSolValue::Array(_) | DynSolValue::Tuple(_)) {
                            keccak256(enc).0
                        } else {
                            enc.try_into().unwrap()
                        }
                    }
                };
                topics.push(word);
            } else {
                body.push(v);
            }
        }
        Log {
            address: [0xaa; 20],
            topics,
            data: DynSolValue::Tuple(body).abi_encode_params(),
            log_index: 0,
            block_number: None,
            block_hash: None,
            transaction_hash: None,
            transaction_index: Some(0),
        }
    }

    fn num(negative: bool, v: u64) -> Value {
        Value::Numeric {
            negative,
            magnitude: U256::from_u64(v),
        }
    }

    #[test]
    fn erc20_transfer_decodes_and_erc721_transfer_does_not_match_it() {
        let erc20 =
            EventSpec::parse("Transfer(address indexed from, address indexed to, uint256 value)")
                .unwrap();
        let erc721 = EventSpec::parse(
            "event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)",
        )
        .unwrap();
        assert_eq!(erc20.topic0, erc721.topic0, "same selector");
        assert_eq!(
            hex0x(&erc20.topic0),
            "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
        );
        let (from, to) = (AAddress::repeat_byte(1), AAddress::repeat_byte(2));
        let log = encode(
            &erc20,
            vec![
                DynSolValue::Address(from),
                DynSolValue::Address(to),
                DynSolValue::Uint(AU256::from(5u64), 256),
            ],
        );
        assert!(erc20.matches(&log) && !erc721.matches(&log));
        assert_eq!(
            erc20.decode(&log).unwrap(),
            vec![
                Value::Bytes(vec![1; 20]),
                Value::Bytes(vec![2; 20]),
                num(false, 5)
            ]
        );
        let nft = encode(
            &erc721,
            vec![
                DynSolValue::Address(from),
                DynSolValue::Address(to),
                DynSolValue::Uint(AU256::from(7u64), 256),
            ],
        );
        assert!(erc721.matches(&nft) && !erc20.matches(&nft));
        assert_eq!(erc721.decode(&nft).unwrap()[2], num(false, 7));
        let kinds: Vec<_> = erc20
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("from", ColumnKind::Bytea),
                ("to", ColumnKind::Bytea),
                ("value", ColumnKind::Numeric)
            ]
        );
    }

    #[test]
    fn every_solidity_type_lands_in_its_column() {
        let spec = EventSpec::parse(
            "E(int8 a, int256 b, uint256 c, bool d, bytes4 e, bytes f, string g, address[] h, (uint8,string) i, string indexed j, bytes indexed k, uint256[2] l, int256 indexed m, bool n)",
        )
        .unwrap();
        let kinds: Vec<_> = spec.params.iter().map(|p| p.kind).collect();
        use ColumnKind::*;
        assert_eq!(
            kinds,
            [
                Numeric, Numeric, Numeric, Boolean, Bytea, Bytea, Text, Jsonb, Jsonb, Bytea, Bytea,
                Jsonb, Numeric, Boolean
            ]
        );
        let addr = AAddress::repeat_byte(0x11);
        let log = encode(
            &spec,
            vec![
                DynSolValue::Int(I256::try_from(-128i64).unwrap(), 8),
                DynSolValue::Int(I256::MIN, 256),
                DynSolValue::Uint(AU256::MAX, 256),
                DynSolValue::Bool(true),
                DynSolValue::FixedBytes(AlloyB256::repeat_byte(0xab), 4),
                DynSolValue::Bytes(vec![0, 1, 2]),
                DynSolValue::String("héllo".into()),
                DynSolValue::Array(vec![DynSolValue::Address(addr)]),
                DynSolValue::Tuple(vec![
                    DynSolValue::Uint(AU256::from(3u8), 8),
                    DynSolValue::String("x".into()),
                ]),
                DynSolValue::String("indexed string".into()),
                DynSolValue::Bytes(vec![9; 40]),
                DynSolValue::FixedArray(vec![
                    DynSolValue::Uint(AU256::from(1u8), 256),
                    DynSolValue::Uint(AU256::from(2u8), 256),
                ]),
                DynSolValue::Int(I256::try_from(-1i64).unwrap(), 256),
                DynSolValue::Bool(false),
            ],
        );
        let got = spec.decode(&log).unwrap();
        assert_eq!(got[0], num(true, 128));
        let two_255 = {
            let mut m = [0u8; 32];
            m[0] = 0x80;
            U256(m)
        };
        assert_eq!(
            got[1],
            Value::Numeric {
                negative: true,
                magnitude: two_255
            }
        );
        assert_eq!(
            got[2],
            Value::Numeric {
                negative: false,
                magnitude: U256([0xff; 32])
            }
        );
        assert_eq!(got[3], Value::Bool(true));
        assert_eq!(got[4], Value::Bytes(vec![0xab; 4]));
        assert_eq!(got[5], Value::Bytes(vec![0, 1, 2]));
        assert_eq!(got[6], Value::Text("héllo".into()));
        assert_eq!(
            got[7],
            Value::Json(format!(r#"["{}"]"#, hex0x(&[0x11; 20])))
        );
        assert_eq!(got[8], Value::Json(r#"["3","x"]"#.into()));
        assert_eq!(
            got[9],
            Value::Bytes(keccak256("indexed string".as_bytes()).to_vec()),
            "indexed dynamic params hold the topic hash"
        );
        assert_eq!(got[10], Value::Bytes(keccak256([9u8; 40]).to_vec()));
        assert_eq!(got[11], Value::Json(r#"["1","2"]"#.into()));
        assert_eq!(got[12], num(true, 1));
        assert_eq!(got[13], Value::Bool(false));
    }

    #[test]
    fn malformed_logs_are_refused_not_misread() {
        let spec =
            EventSpec::parse("Transfer(address indexed from, address indexed to, uint256 value)")
                .unwrap();
        let good = encode(
            &spec,
            vec![
                DynSolValue::Address(AAddress::ZERO),
                DynSolValue::Address(AAddress::ZERO),
                DynSolValue::Uint(AU256::from(1u8), 256),
            ],
        );
        let mut short = good.clone();
        short.data.truncate(31);
        assert!(spec.matches(&short));
        assert!(spec.decode(&short).is_err(), "short data");
        let mut fewer = good.clone();
        fewer.topics.pop();
        assert!(!spec.matches(&fewer), "wrong topic count: not this event");
        assert!(spec.decode(&fewer).is_err());
        let mut other = good;
        other.topics[0] = [0x01; 32];
        assert!(!spec.matches(&other));
        let flag = EventSpec::parse("F(bool b)").unwrap();
        let mut bad_bool = encode(&flag, vec![DynSolValue::Bool(true)]);
        bad_bool.data[31] = 2;
        assert!(flag.decode(&bad_bool).is_err(), "a bool word of 2");
        let mut trailing = encode(&flag, vec![DynSolValue::Bool(true)]);
        trailing.data.push(0);
        assert!(flag.decode(&trailing).is_err(), "a trailing byte");
        for bad in ["Transfer(address", "E(uint7 x)", "E(address a) anonymous"] {
            assert!(EventSpec::parse(bad).is_err(), "{bad}");
        }
        let unnamed = EventSpec::parse("Ping(uint256, address)").unwrap();
        assert_eq!(unnamed.params[0].name, "arg0");
    }
}
