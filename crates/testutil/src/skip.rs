//! Skipping a test that cannot run here — counted, never silently passed.
//!
//! A test that needs something this machine lacks (Open vSwitch, root, the project's shared
//! data beside the checkout) calls [`skip`] and returns. Cargo still reports it as passed, so
//! the skip is also made visible outside the test:
//!
//! - `FLOWSWITCH_SKIP_LOG=FILE`: each skip appends one line `<test>: <reason>` to FILE;
//!   `scripts/test-all.sh` sets it and reports those tests as skipped, not passed.
//! - `FLOWSWITCH_NO_SKIP=1`: a skip is a failure (the test panics with the reason). CI
//!   (`.ci/run`), which installs everything the tests need, sets it: there a test that
//!   cannot run is a broken setup, not a pass.

use std::io::Write;

/// Environment variable naming the file skips are appended to.
pub const SKIP_LOG_ENV: &str = "FLOWSWITCH_SKIP_LOG";
/// Environment variable that turns every skip into a failure.
pub const NO_SKIP_ENV: &str = "FLOWSWITCH_NO_SKIP";

/// Records that the current test cannot run here, for `reason` (see the module doc), and
/// panics instead when skips are not allowed. The caller returns right after.
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    if std::env::var(NO_SKIP_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        panic!("{test} cannot run here and {NO_SKIP_ENV} forbids skipping: {reason}");
    }
    eprintln!("SKIP: {test}: {reason}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        let line = format!("{test}: {}\n", reason.replace('\n', " "));
        // One write of one short line in append mode: lines of concurrent tests do not mix.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!(
                "{test}: cannot record its skip in {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs this test binary's `child` test with `env` set and returns (success, stderr).
    fn child(env: &[(&str, &str)]) -> (bool, String) {
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["--exact", "skip::tests::skipping_child", "--nocapture"])
            .env("SKIP_TEST_CHILD", "1")
            .env_remove(NO_SKIP_ENV)
            .env_remove(SKIP_LOG_ENV);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run child");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The test the parent runs in a child process (does nothing when run directly).
    #[test]
    fn skipping_child() {
        if std::env::var_os("SKIP_TEST_CHILD").is_some() {
            skip("no widget here");
        }
    }

    #[test]
    fn a_skip_is_logged_and_forbidden_when_asked() {
        let dir = std::env::temp_dir().join(format!("testutil-skip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("skips.txt");
        let log_s = log.to_str().expect("utf-8 path");
        let (ok, err) = child(&[(SKIP_LOG_ENV, log_s)]);
        assert!(ok, "{err}");
        assert!(
            err.contains("SKIP: skip::tests::skipping_child: no widget here"),
            "{err}"
        );
        let logged = std::fs::read_to_string(&log).expect("log");
        assert_eq!(logged, "skip::tests::skipping_child: no widget here\n");
        let (ok, err) = child(&[(NO_SKIP_ENV, "1"), (SKIP_LOG_ENV, log_s)]);
        assert!(!ok, "a forbidden skip must fail: {err}");
        assert!(err.contains("forbids skipping: no widget here"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
