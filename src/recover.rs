//! Sender recovery: the one process-wide secp256k1 context and the bounded
//! worker pool that every recovery in the process runs on.
//!
//! This project exists because rust-web3's `recover` built a new secp256k1
//! `verification_only()` context on every call (about 7 ms a recovery
//! with the libsecp256k1 of its day, instead of about 50 µs). Here the
//! context is built once, lazily, in [`context`], and shared read-only by
//! every thread; nothing else in the crate may construct one. (With the
//! secp256k1 0.30 we pin, whose tables are static, a context per call costs
//! little: `cargo bench --bench recovery` measures it. One context is still
//! the rule: it costs nothing and holds for any version.) We pin a secp256k1 release whose API takes the
//! context explicitly, and leave its `rand` feature off: re-randomizing
//! only protects signing, which we never do.
//!
//! The pool is plain `std::thread`s, not `spawn_blocking`: recovery is
//! long-running CPU work that must not occupy tokio's blocking threads or
//! delay the runtime's shutdown (reth's sender-recovery stage does the
//! same). This module does no async I/O and no SQL, and checks no block
//! (that is `verify`'s); what it finds goes into [`crate::block`]'s types.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use once_cell::sync::Lazy;
use secp256k1::ecdsa::{RecoverableSignature, RecoveryId};
use secp256k1::{Message, Secp256k1, VerifyOnly};
use std::ops::Range;
use tokio::sync::{Semaphore, oneshot};

use crate::block::BlockTx;
pub use crate::block::{RecoverError, Recovered};
use crate::chain::{Family, Profile, SenderSource};
use crate::decode::{Address, Authorization, B256, DecodeError, Tx, U256, keccak};

static SECP256K1: Lazy<Secp256k1<VerifyOnly>> = Lazy::new(Secp256k1::verification_only);

/// The process-wide verification context. Building one costs milliseconds;
/// using it costs nothing, and it is safe to share between threads.
pub fn context() -> &'static Secp256k1<VerifyOnly> {
    &SECP256K1
}

/// The order n of the secp256k1 group: r and s must lie in [1, n-1].
const SECP256K1_N: U256 = U256([
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
]);

/// Recovers the address that signed `hash`: the last 20 bytes of keccak256
/// of the uncompressed public key without its 0x04 prefix.
///
/// High-s signatures are accepted: they were valid before Homestead, and
/// recovery does not need the low-s normal form.
pub fn recover_address(
    hash: &B256,
    r: &U256,
    s: &U256,
    parity: u8,
) -> Result<Address, RecoverError> {
    for (name, x) in [("r", r), ("s", s)] {
        if x.is_zero() {
            return Err(RecoverError::Zero(name));
        }
        if *x >= SECP256K1_N {
            return Err(RecoverError::OutOfRange(name));
        }
    }
    let recid = RecoveryId::try_from(i32::from(parity))
        .map_err(|_| RecoverError::InvalidParity(U256::from_u64(parity.into())))?;
    let mut compact = [0u8; 64];
    compact[..32].copy_from_slice(&r.0);
    compact[32..].copy_from_slice(&s.0);
    let sig =
        RecoverableSignature::from_compact(&compact, recid).map_err(|_| RecoverError::NoKey)?;
    let key = context()
        .recover_ecdsa(&Message::from_digest(*hash), &sig)
        .map_err(|_| RecoverError::NoKey)?;
    Ok(pubkey_to_address(&key.serialize_uncompressed()))
}

/// Address of an uncompressed (65-byte, 0x04-prefixed) public key.
pub fn pubkey_to_address(uncompressed: &[u8; 65]) -> Address {
    let digest = keccak(&[&uncompressed[1..]]);
    digest[12..].try_into().expect("20 bytes")
}

fn y_parity(p: &U256) -> Result<u8, RecoverError> {
    match p.to_u64() {
        Some(0) => Ok(0),
        Some(1) => Ok(1),
        _ => Err(RecoverError::InvalidParity(*p)),
    }
}

/// The recovery id a transaction's signature carries.
fn tx_parity(tx: &Tx) -> Result<u8, RecoverError> {
    if tx.tx_type != 0 {
        // Typed txs carry yParity; some nodes report only `v`, which then
        // holds the same 0/1 (or, from old clients, 27/28).
        let p = tx
            .y_parity
            .or(tx.v)
            .ok_or(RecoverError::MissingSignature("yParity"))?;
        return match p.to_u64() {
            Some(v @ (27 | 28)) if tx.y_parity.is_none() => Ok((v - 27) as u8),
            _ => y_parity(&p),
        };
    }
    let v = tx.v.ok_or(RecoverError::MissingSignature("v"))?;
    match v.to_u64() {
        Some(27) => Ok(0),
        Some(28) => Ok(1),
        _ if v >= U256::from_u64(35) => Ok(1 - (v.0[31] & 1)), // v = 2·id + 35 + parity
        _ => Err(RecoverError::InvalidV(v)),
    }
}

/// Recovers a transaction's sender, and for type 4 every authority, by
/// Ethereum's rules (ECDSA for every type).
pub fn recover_tx(tx: &Tx) -> Recovered {
    Recovered {
        sender: recover_sender(tx),
        source: SenderSource::Recovered,
        authorities: tx
            .authorization_list
            .iter()
            .map(recover_authority)
            .collect(),
    }
}

/// `tx`'s sender from where `profile` says it comes: recovered from the
/// signature, the `from` its hash commits to, none (a system transaction),
/// or the node's `from` as reported. A type the profile does not know is
/// recovered as a signed one; `verify` refuses the block, naming the type.
pub fn recover_tx_in(tx: &Tx, profile: &Profile) -> Recovered {
    let (sender, source) = match profile.sender_source(tx.tx_type) {
        None | Some(SenderSource::Recovered) => return recover_tx(tx),
        Some(SenderSource::Committed) => (
            tx.committed_sender()
                .ok_or(RecoverError::MissingCommitted("from")),
            SenderSource::Committed,
        ),
        Some(SenderSource::None) => (Err(RecoverError::NoSender), SenderSource::None),
        Some(SenderSource::Reported) => (
            tx.from.ok_or(RecoverError::MissingCommitted("from")),
            SenderSource::Reported,
        ),
    };
    Recovered {
        sender,
        source,
        authorities: Vec::new(),
    }
}

fn recover_sender(tx: &Tx) -> Result<Address, RecoverError> {
    let hash = tx.signing_hash()?;
    let r = tx.r.ok_or(RecoverError::MissingSignature("r"))?;
    let s = tx.s.ok_or(RecoverError::MissingSignature("s"))?;
    recover_address(&hash, &r, &s, tx_parity(tx)?)
}

fn recover_authority(a: &Authorization) -> Result<Address, RecoverError> {
    let hash = a.signing_hash().ok_or(RecoverError::MissingSignature(
        "authorizationList.chainId/address/nonce",
    ))?;
    let parity = a
        .y_parity
        .ok_or(RecoverError::MissingSignature("authorizationList.yParity"))?;
    let r =
        a.r.ok_or(RecoverError::MissingSignature("authorizationList.r"))?;
    let s =
        a.s.ok_or(RecoverError::MissingSignature("authorizationList.s"))?;
    recover_address(&hash, &r, &s, y_parity(&parity)?)
}

/// Decodes and recovers the transactions at `ranges` of a block's text, in
/// order. A malformed one yields its `DecodeError` in place; the rest go on.
pub fn recover_slices(text: &str, ranges: &[Range<usize>]) -> Vec<Result<BlockTx, DecodeError>> {
    recover_slices_with(text, ranges, Family::Ethereum, |_| ())
        .into_iter()
        .map(|r| r.map(|(tx, ())| tx))
        .collect()
}

/// [`recover_slices`], with `also` run on each decoded transaction on the
/// same thread while its text is in cache (the pipeline computes what it
/// verifies the block with there); its result comes back beside the
/// transaction.
pub fn recover_slices_with<P>(
    text: &str,
    ranges: &[Range<usize>],
    family: Family,
    mut also: impl FnMut(&Tx) -> P,
) -> Vec<Result<(BlockTx, P), DecodeError>> {
    let profile = family.profile();
    (0..ranges.len())
        .map(|i| {
            if let Some(next) = ranges.get(i + 1) {
                prefetch(&text.as_bytes()[next.clone()]);
            }
            let tx = Tx::from_json_in(&text[ranges[i].clone()], family)?;
            let recovered = recover_tx_in(&tx, profile);
            let extra = also(&tx);
            Ok((
                BlockTx {
                    tx,
                    recovered,
                    receipt: None,
                    void_authorizations: Vec::new(),
                },
                extra,
            ))
        })
        .collect()
}

/// Asks the CPU to bring `bytes`, the next transaction's text, into its
/// caches while the current one is decoded and recovered (~30 µs of
/// arithmetic that touches little memory), so the next decode does not
/// stall on it. Worth 1-1.5% of one thread's throughput on the fixture
/// transactions. A hint only: no effect on results, none off x86_64.
/// Stops after 16 KiB: by then the hardware prefetcher follows the read.
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..bytes.len().min(16 << 10)).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch never faults nor changes memory, and the
        // address lies inside `bytes`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(at).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Recovery jobs queued or running per recovery thread: enough to keep
/// every thread busy while the producer refills, few enough that memory
/// stays small.
pub const JOBS_PER_THREAD: usize = 4;

/// A thread count from the settings: 0 means one per core.
pub fn resolve_threads(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of recovery threads fed through a queue whose depth is
/// bounded by a semaphore: [`Pool::spawn`] waits for a permit, so a fast
/// producer is slowed to the pool's pace instead of filling memory.
///
/// Results come back through one oneshot channel per job; a caller that
/// keeps the receivers in submission order gets results in order however
/// the threads interleave (reth's sender-recovery stage does the same).
pub struct Pool {
    jobs_tx: Option<std_mpsc::Sender<Job>>,
    permits: Arc<Semaphore>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `threads` workers (0 means one per core) and at most `queue_depth`
    /// jobs queued or running at once.
    pub fn new(threads: usize, queue_depth: usize) -> Pool {
        let threads = resolve_threads(threads);
        let (jobs_tx, jobs_rx) = std_mpsc::channel::<Job>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        // Build the shared context before any job races to do it.
        Lazy::force(&SECP256K1);
        let workers = (0..threads)
            .map(|i| {
                let jobs_rx = Arc::clone(&jobs_rx);
                std::thread::Builder::new()
                    .name(format!("recover-{i}"))
                    .spawn(move || {
                        loop {
                            // The lock is held only while taking a job.
                            let job = match jobs_rx.lock() {
                                Ok(rx) => rx.recv(),
                                Err(_) => return,
                            };
                            match job {
                                // A panicking job drops its result sender, so
                                // its caller sees an error; the worker lives on.
                                Ok(job) => drop(catch_unwind(AssertUnwindSafe(job))),
                                Err(_) => return, // pool dropped
                            }
                        }
                    })
                    .expect("spawn recovery thread")
            })
            .collect();
        Pool {
            jobs_tx: Some(jobs_tx),
            permits: Arc::new(Semaphore::new(queue_depth.max(1))),
            workers,
        }
    }

    /// A pool sized from the `index.threads` setting (0: one per core),
    /// with [`JOBS_PER_THREAD`] jobs queued or running per thread.
    pub fn from_setting(threads: usize) -> Pool {
        let threads = resolve_threads(threads);
        Pool::new(threads, threads * JOBS_PER_THREAD)
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Queues `f` once a slot is free and returns where its result will
    /// arrive. The receiver errs only if `f` panicked.
    pub async fn spawn<T, F>(&self, f: F) -> oneshot::Receiver<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("pool semaphore is never closed");
        let (result_tx, result_rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _permit = permit; // released when the job ends, even by panic
            let _ = result_tx.send(f());
        });
        self.jobs_tx
            .as_ref()
            .expect("pool is running")
            .send(job)
            .expect("recovery threads outlive the pool handle");
        result_rx
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        drop(self.jobs_tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_zero_and_out_of_range_scalars() {
        let h = [7u8; 32];
        let one = U256::from_u64(1);
        assert_eq!(
            recover_address(&h, &U256::ZERO, &one, 0),
            Err(RecoverError::Zero("r"))
        );
        assert_eq!(
            recover_address(&h, &one, &U256::ZERO, 0),
            Err(RecoverError::Zero("s"))
        );
        assert_eq!(
            recover_address(&h, &SECP256K1_N, &one, 0),
            Err(RecoverError::OutOfRange("r"))
        );
        assert_eq!(
            recover_address(&h, &one, &U256([0xff; 32]), 0),
            Err(RecoverError::OutOfRange("s"))
        );
        assert!(matches!(
            recover_address(&h, &one, &one, 4),
            Err(RecoverError::InvalidParity(_))
        ));
    }

    #[test]
    fn legacy_v_decides_parity() {
        let mut tx = Tx {
            v: Some(U256::from_u64(27)),
            ..Tx::default()
        };
        assert_eq!(tx_parity(&tx), Ok(0));
        tx.v = Some(U256::from_u64(38)); // chain 1, parity 1
        assert_eq!(tx_parity(&tx), Ok(1));
        tx.v = Some(U256::from_u64(37));
        assert_eq!(tx_parity(&tx), Ok(0));
        tx.v = Some(U256::from_u64(1));
        assert!(matches!(tx_parity(&tx), Err(RecoverError::InvalidV(_))));
        tx.tx_type = 2;
        assert_eq!(tx_parity(&tx), Ok(1)); // typed: v holds yParity
    }

    #[tokio::test]
    async fn pool_keeps_submission_order_and_survives_panics() {
        let pool = Pool::new(2, 4);
        let mut rxs = Vec::new();
        for i in 0..64u64 {
            rxs.push(
                pool.spawn(move || {
                    if i == 5 {
                        panic!("job {i} panics on purpose");
                    }
                    std::thread::sleep(std::time::Duration::from_micros((64 - i) * 50));
                    i
                })
                .await,
            );
        }
        for (i, rx) in rxs.into_iter().enumerate() {
            match rx.await {
                Ok(v) => assert_eq!(v, i as u64),
                Err(_) => assert_eq!(i, 5),
            }
        }
    }

    #[test]
    fn a_malformed_transaction_fails_in_place() {
        // A hash among objects (a proxy mixing answers) is decoded like any
        // other entry and fails alone, with a decode error naming the JSON
        // problem; `assemble` adds block and index.
        let text = r#"[{"type":"0x0"},"0xab",{"type":"zz"}]"#;
        let ranges = [1..15, 16..22, 23..36];
        assert_eq!(&text[ranges[1].clone()], r#""0xab""#);
        let got = recover_slices(text, &ranges);
        assert_eq!(got.len(), 3);
        assert!(got[0].is_ok(), "{:?}", got[0]);
        assert!(matches!(got[1], Err(DecodeError::Json(_))), "{:?}", got[1]);
        assert!(
            matches!(got[2], Err(DecodeError::Field { field: "type", .. })),
            "{:?}",
            got[2]
        );
    }
}
