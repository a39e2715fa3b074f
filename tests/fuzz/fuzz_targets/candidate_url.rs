//! Candidate URLs of a research request (SPEC F1;
//! `labfy_store::screen_candidate`), over values found in hostile text:
//! never panics; an accepted value is an http(s) URL without credentials or
//! fragment, of at most 2048 bytes, whose host is neither an address the
//! public Internet does not route nor IPv6 nor an onion name other than a
//! v3 address (56 base32 characters ending in `d`, its version; SPEC F3 —
//! the checksum is the store's to check), which the
//! grant's own URL check accepts unchanged with the proposed host as its
//! scope, and which screens to itself again (idempotent); a refusal names
//! its reason. Input: exclusions separated by commas, a newline, then the
//! value.
#![no_main]

use labfy_store::{MAX_URL_BYTES, check_campaign_url, screen_candidate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (exclusions, value) = text.split_once('\n').unwrap_or(("", text));
    let exclusions: Vec<String> = exclusions.split(',').filter(|x| !x.is_empty()).map(str::to_owned).take(8).collect();
    match screen_candidate(value, &exclusions) {
        Ok(s) => {
            assert!(s.url.len() <= MAX_URL_BYTES, "{} bytes", s.url.len());
            let parsed = url::Url::parse(&s.url).expect("a proposal parses");
            assert!(matches!(parsed.scheme(), "http" | "https"), "{}", s.url);
            assert!(parsed.username().is_empty() && parsed.password().is_none(), "credentials kept: {}", s.url);
            assert!(parsed.fragment().is_none(), "fragment kept: {}", s.url);
            match parsed.host() {
                Some(url::Host::Ipv4(ip)) => {
                    assert!(!(ip.is_private() || ip.is_loopback() || ip.is_link_local() || ip.is_unspecified()), "{ip}");
                }
                Some(url::Host::Domain(d)) => {
                    assert!(d != "localhost" && d.contains('.'), "{d}");
                    if let Some(name) = d.strip_suffix(".onion") {
                        let v3 = name.rsplit('.').next().unwrap_or_default();
                        let base32 = v3.bytes().all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b));
                        assert!(v3.len() == 56 && base32 && v3.ends_with('d'), "onion {d} proposed");
                    }
                }
                other => panic!("host {other:?} proposed"),
            }
            assert_eq!(check_campaign_url(&s.url, std::slice::from_ref(&s.host)).ok().as_deref(), Some(s.url.as_str()));
            assert_eq!(screen_candidate(&s.url, &exclusions).ok().map(|again| again.url), Some(s.url.clone()));
            for x in &exclusions {
                let x = x.trim().to_lowercase();
                assert!(x.chars().count() < 3 || !s.url.to_lowercase().contains(&x), "{} kept despite `{x}`", s.url);
            }
        }
        Err((reason, detail)) => {
            assert!(detail.as_deref().is_none_or(|d| !d.is_empty()), "{reason:?} with an empty detail");
        }
    }
});
