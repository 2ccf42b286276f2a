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
    let mut expected: Vec<Option<String>> = Vec::new();
    for (i, f) in txs.iter().enumerate() {
        input.push_str(&f.line);
        input.push('\n');
        expected.push(Some(f.tx["from"].as_str().unwrap().to_lowercase()));
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
            Some(from) => {
                assert_eq!(
                    line["sender"].as_str(),
                    Some(from.as_str()),
                    "line {i}: {line}"
                );
                assert!(line.get("error").is_none(), "line {i}: {line}");
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
