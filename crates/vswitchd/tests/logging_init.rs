//! `logging::init` installs the process-wide subscriber (its own test binary: once per
//! process).

use vswitchd::logging::{self, LogOptions, RateLimiter};
use vswitchd::unixctl::{self, Server};

static RL: RateLimiter = RateLimiter::new(1, 1);

#[test]
fn init_installs_the_global_subscriber_once() {
    let dir = std::env::temp_dir().join(format!("fs-vlog-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("d.log");
    let h = logging::init(LogOptions {
        log_file: Some(log.clone()),
        syslog_socket: None,
        specs: vec!["console:off".into()],
        ..LogOptions::default()
    })
    .expect("init");
    let again = logging::init(LogOptions {
        syslog_socket: None,
        ..LogOptions::default()
    });
    assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);

    // Any thread logs through it; disabled levels do not.
    std::thread::spawn(|| {
        tracing::info!(target: "glob", "from a thread");
        tracing::debug!(target: "glob", "not at info");
    })
    .join()
    .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("|glob|INFO|from a thread"), "{text}");
    assert!(!text.contains("not at info"), "{text}");

    // The control commands reach it; a rate-limited message logged from a connection's
    // handler thread shows that thread.
    let sock = dir.join("ctl");
    let s = Server::bind(&sock).unwrap();
    logging::register_commands(&s, &h);
    s.register("test/log", "", 0, 0, |_| {
        for _ in 0..3 {
            vswitchd::rl_warn!(RL, target: "glob", "limited");
        }
        Ok(String::new())
    });
    assert_eq!(
        unixctl::call(&sock, "vlog/set", &["glob:file:dbg"]).unwrap(),
        Ok(String::new())
    );
    std::thread::spawn(|| tracing::debug!(target: "glob", "now at dbg"))
        .join()
        .unwrap();
    assert_eq!(
        unixctl::call(&sock, "test/log", &[]).unwrap(),
        Ok(String::new())
    );
    assert_eq!(
        unixctl::call(&sock, "vlog/disable-rate-limit", &["glob"]).unwrap(),
        Ok(String::new())
    );
    assert_eq!(
        unixctl::call(&sock, "test/log", &[]).unwrap(),
        Ok(String::new())
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("|glob|DBG|now at dbg"), "{text}");
    assert_eq!(
        text.matches("|glob(unixctl)|WARN|limited\n").count(),
        4,
        "one of the first three, all of the next three:\n{text}"
    );
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}
