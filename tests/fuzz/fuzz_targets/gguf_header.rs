//! The GGUF header reader and the run estimate (SPEC Q2, M11): a model file
//! is an operator's input, hostile or broken. Reading never panics nor
//! allocates past its budget; a header read sizes a run without overflow.
//! Input: the file's claimed length (8 bytes, little-endian), then its
//! first bytes.
#![no_main]

use labfy_governor::gguf::header_from_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (len, bytes) = data.split_at(8);
    let file_size = u64::from_le_bytes(len.try_into().expect("8 bytes")) % (1 << 40);
    match header_from_bytes(bytes, file_size) {
        Ok(header) => {
            for (ctx, layers) in [(512, 0), (4096, 999), (262_144, 1)] {
                let e = header.estimate(ctx, layers);
                assert!(e.ram.checked_add(e.vram).is_some());
                assert!(e.weights_on_gpu <= e.weights, "more weights on the GPU than in the file");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "a refusal without a reason"),
    }
});
