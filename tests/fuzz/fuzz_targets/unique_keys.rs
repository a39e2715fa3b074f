//! One meaning per JSON body (SPEC T5): `check_unique_keys` never panics and
//! agrees with `serde_json` (the reference tokenizer) on everything but
//! what it exists to refuse — a key twice in one object, or nesting past
//! its bound.
#![no_main]

use labfy_core::json::{MAX_DEPTH, check_unique_keys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let strict = check_unique_keys(data);
    let reference = serde_json::from_slice::<serde_json::Value>(data);
    match (&strict, &reference) {
        (Ok(()), Err(e)) => panic!("accepted what serde_json refuses ({e})"),
        (Err(e), Ok(_)) => assert!(
            e.contains("duplicate key") || e.contains(&format!("nested deeper than {MAX_DEPTH}")),
            "refused a valid document for another reason: {e}"
        ),
        (Err(e), Err(_)) => assert!(!e.is_empty()),
        (Ok(()), Ok(value)) => {
            // What it accepted, printed again, is accepted again.
            let printed = serde_json::to_vec(value).expect("a value prints");
            assert!(check_unique_keys(&printed).is_ok(), "print ∘ parse refused: {value}");
        }
    }
});
