//! Object references (`evidence:<uuid>`, SPEC M9): parsing never panics, and
//! what parses prints back to the same text's canonical form, which parses
//! to the same reference.
#![no_main]

use labfy_core::ObjectRef;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match text.parse::<ObjectRef>() {
        Ok(r) => {
            let printed = r.to_string();
            assert_eq!(printed, text, "a reference is accepted only in its canonical form");
            assert_eq!(printed.parse::<ObjectRef>().expect("a printed reference parses"), r);
            assert_eq!(ObjectRef::parse_kind(&printed, r.kind()).expect("its own kind"), r);
        }
        Err(e) => assert!(!e.to_string().is_empty(), "a refusal without a reason"),
    }
});
