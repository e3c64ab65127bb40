//! `COMPUTE_COLLECTIVE_TIMEOUT_MS` sets the default timeout. Alone in its
//! binary: it changes the process environment.

use std::time::Duration;

use compute_collective::CommConfig;

#[test]
fn the_environment_sets_the_default_timeout() {
    let set = |value: &str| {
        // SAFETY: the only test of this binary, so no other thread reads or
        // writes the environment meanwhile.
        unsafe { std::env::set_var(CommConfig::TIMEOUT_ENV, value) };
        CommConfig::default().timeout
    };
    assert_eq!(set("1234"), Duration::from_millis(1234));
    assert_eq!(set(" 50 "), Duration::from_millis(50));
    assert_eq!(set("soon"), CommConfig::DEFAULT_TIMEOUT);
    // SAFETY: as above.
    unsafe { std::env::remove_var(CommConfig::TIMEOUT_ENV) };
    assert_eq!(CommConfig::default().timeout, Duration::from_secs(60));
    assert_eq!(
        CommConfig::default()
            .with_timeout(Duration::from_millis(7))
            .timeout,
        Duration::from_millis(7)
    );
}
