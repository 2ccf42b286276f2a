//! The `recover` command, through the real binary: every fixture line in,
//! one result line out per input line, in order, bad lines included.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::fixtures;

#[test]
fn recover_command_answers_every_line_in_order() {
    let txs = fixtures::transactions();
    let mut input = String::new();
    let mut expected: Vec<Option<(String, bool)>> = Vec::new();
    for (i, f) in txs.iter().enumerate() {
        input.push_str(&f.line);
        input.push('\n');
        expected.push(Some((
            f.tx["from"].as_str().unwrap().to_lowercase(),
            f.tx.get("hash").is_some(),
        )));
        if i % 1000 == 0 {
            input.push_str("{this is not json\n");
            expected.push(None);
        }
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_sender-indexer"))
        .args(["recover", "--threads", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = std::str::from_utf8(&out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), expected.len());
    let mut authorities = 0;
    for (i, (line, want)) in lines.iter().zip(&expected).enumerate() {
        match want {
            Some((from, has_hash)) => {
                assert_eq!(
                    line["sender"].as_str(),
                    Some(from.as_str()),
                    "line {i}: {line}"
                );
                assert!(line.get("error").is_none(), "line {i}: {line}");
                assert_eq!(line["source"], "recovered", "line {i}: {line}");
                // Every line with a hash is checked against it.
                let verified = if *has_hash {
                    Value::Bool(true)
                } else {
                    Value::Null
                };
                assert_eq!(line["hash_verified"], verified, "line {i}: {line}");
                if let Some(a) = line.get("authorities") {
                    authorities += a
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|a| a.is_string())
                        .count();
                }
            }
            None => {
                assert!(line["sender"].is_null(), "line {i}: {line}");
                assert!(
                    line["error"]
                        .as_str()
                        .unwrap()
                        .contains("invalid transaction")
                );
            }
        }
    }
    assert_eq!(authorities, 16);
}

#[test]
fn recover_command_on_empty_input_prints_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_sender-indexer"))
        .arg("recover")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn a_log_written_to_a_file_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr.log");
    let status = Command::new(env!("CARGO_BIN_EXE_sender-indexer"))
        .args(["recover", "--threads", "1"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&path).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let log = std::fs::read_to_string(&path).unwrap();
    assert!(log.contains("recover done"), "{log}");
    assert!(!log.contains('\x1b'), "escape sequences in a file: {log:?}");
}

fn chain_fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/chains/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Runs `recover` with `args` on `lines`; one parsed output line each.
fn recover_lines(args: &[&str], lines: &[Value]) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sender-indexer"))
        .arg("recover")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Value> = std::str::from_utf8(&out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), lines.len());
    got
}

/// A line whose sender was obtained and checked: the node's `from`, how it
/// was obtained, and its hash rebuilt from the fields.
fn assert_checked(line: &Value, tx: &Value, source: &str) {
    assert_eq!(line["hash"], tx["hash"], "{line}");
    assert_eq!(
        line["sender"].as_str(),
        tx["from"].as_str().map(str::to_lowercase).as_deref(),
        "{line}"
    );
    assert_eq!(line["source"], source, "{line}");
    assert_eq!(line["hash_verified"], true, "{line}");
    assert!(line.get("error").is_none(), "{line}");
}

/// An error line: no sender printed, and the error says `why`.
fn assert_refused(line: &Value, why: &str) {
    assert!(line["sender"].is_null(), "a sender printed: {line}");
    let error = line["error"].as_str().unwrap_or_default();
    assert!(error.contains(why), "{why:?} not in {line}");
}

#[test]
fn recover_says_how_each_sender_was_obtained_and_checks_the_hash() {
    let deposit = chain_fixture("op-tx-bc9329af.json");
    let user_deposit = chain_fixture("op-tx-0bf1845c.json");
    let celo_legacy = chain_fixture("celo-tx-af717775.json");
    let celo_1559 = chain_fixture("celo-tx-b733188a.json");
    let scroll = chain_fixture("scroll-tx-36199419.json");
    let mainnet = fixtures::transactions()
        .into_iter()
        .find(|f| f.tx.get("hash").is_some())
        .unwrap()
        .tx;
    let mut minted = user_deposit.clone();
    minted["mint"] = Value::from("0x1");
    let mut paid = mainnet.clone();
    paid["value"] = Value::from("0x1234567");

    // OP Mainnet: deposits carry no chainId; the fee-currency Celo lines
    // carry theirs and are read by Celo's rules whatever --chain-id says.
    let out = recover_lines(
        &["--chain-id", "10"],
        &[
            deposit.clone(),
            user_deposit.clone(),
            minted,
            celo_legacy.clone(),
            celo_1559.clone(),
            mainnet.clone(),
            paid,
            scroll.clone(),
        ],
    );
    assert_checked(&out[0], &deposit, "committed");
    assert_checked(&out[1], &user_deposit, "committed");
    assert_refused(&out[2], "not its hash");
    assert_eq!(out[2]["hash_verified"], false);
    assert_checked(&out[3], &celo_legacy, "recovered");
    assert_checked(&out[4], &celo_1559, "recovered");
    assert_checked(&out[5], &mainnet, "recovered");
    assert_refused(&out[6], "not its hash");
    // Scroll's L1 message read as an OP deposit: not its hash, no sender.
    assert!(out[7]["sender"].is_null(), "{}", out[7]);
    assert!(out[7]["error"].is_string(), "{}", out[7]);

    // Scroll: its 0x7e is an L1 message, committed by its hash.
    let out = recover_lines(&["--chain-id", "534352"], std::slice::from_ref(&scroll));
    assert_checked(&out[0], &scroll, "committed");

    // No chain given: a deposit's type is unknown to Ethereum's rules.
    let out = recover_lines(&[], &[deposit]);
    assert_refused(&out[0], "0x7e");
    assert!(
        out[0]["error"].as_str().unwrap().contains("--chain-id"),
        "{}",
        out[0]
    );
}
