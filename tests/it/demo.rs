//! The README's quickstart, `scripts/demo.sh`, run as a newcomer runs it,
//! twice (the second run starts over on a new chain): it installs nothing
//! here (scripts/test.sh did), starts its own anvil, indexes with `sync`
//! (backfill, then three blocks followed live) into its own embedded
//! cluster, and prints the two cookbook answers. The binary under test
//! stands in for the release build.

use std::process::{Command, Stdio};

/// What the script sends (see its comments): account 1 signs 8 token
/// transfers of 100..=800, a legacy one of 1, and one of 1 while `sync`
/// follows; 10 transactions and 3,602 tokens, the most of any account.
const ACCOUNT_1: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

fn demo(dir: &std::path::Path) -> (String, String) {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"))
        .env("SENDER_INDEXER_BIN", env!("CARGO_BIN_EXE_sender-indexer"))
        .env("SENDER_INDEXER_DEMO_DIR", dir)
        .env_remove("DATABASE_URL")
        .env_remove("RPC_URL")
        .env_remove("SENDER_INDEXER_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "demo.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// The rows of the table printed after `heading`, as trimmed cells.
fn table_after(stdout: &str, heading: &str) -> Vec<Vec<String>> {
    let at = stdout
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{stdout}"));
    stdout[at..]
        .lines()
        .skip_while(|l| !l.starts_with("---"))
        .skip(1)
        .take_while(|l| l.contains('|'))
        .map(|l| l.split('|').map(|c| c.trim().to_owned()).collect())
        .collect()
}

/// A read-only query on the demo's database, through the binary.
fn sql(dir: &std::path::Path, query: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sender-indexer"))
        .arg("--data-dir")
        .arg(dir.join("pg"))
        .args(["sql", query])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_quickstart_prints_both_answers_and_runs_again() {
    // Under /tmp, as the script's default.
    let parent = crate::support::pg::server_tempdir("sender-indexer-demo-test-");
    let dir = parent.path().join("demo");

    for run in 1..=2 {
        let (stdout, stderr) = demo(&dir);
        let ctx = format!("run {run}:\n{stdout}\n{stderr}");
        assert!(stdout.contains("follows the head"), "{ctx}");
        let followed = stdout
            .lines()
            .find_map(|l| l.strip_prefix("followed up to block "))
            .unwrap_or_else(|| panic!("no follow step: {ctx}"));
        let head: u64 = followed.split(';').next().unwrap().parse().unwrap();

        let senders = table_after(&stdout, "top senders");
        assert_eq!(
            senders.first().map(|r| &r[..3]),
            Some(&[ACCOUNT_1.to_owned(), "10".into(), "true".into()][..]),
            "{ctx}"
        );
        assert!(senders.iter().all(|r| r[2] == "true"), "{ctx}");
        let transfers = table_after(&stdout, "senders behind the Transfer events");
        assert_eq!(
            transfers.first().map(|r| &r[..3]),
            Some(&[ACCOUNT_1.to_owned(), "10".into(), "3602".into()][..]),
            "{ctx}"
        );
        assert!(stdout.contains("sql \"SELECT"), "says how to query: {ctx}");
        assert!(stdout.contains("RPC_URL="), "says how to go real: {ctx}");

        // The database it leaves: every block up to the followed head,
        // every transaction counted in its block, every sender recovered.
        let check = sql(
            &dir,
            "SELECT count(*) || '/' || max(number) || '/' || sum(tx_count) || '/' || (SELECT count(*) FROM transactions WHERE sender IS NOT NULL) FROM blocks",
        );
        let row = check.lines().nth(2).unwrap_or("").trim().to_owned();
        let cells: Vec<u64> = row.split('/').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cells[0], head + 1, "blocks 0..={head}: {row}");
        assert_eq!(cells[1], head, "{row}");
        assert_eq!(
            cells[2], cells[3],
            "each transaction with its sender: {row}"
        );
        assert!(cells[2] >= 25, "{row}");
    }
}
