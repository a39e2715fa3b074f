//! The GGUF reader and the llama-server estimate through the public API
//! (SPEC Q2, M11): synthetic files from `gguf::testing`, a sparse
//! multi-GB model, and the real gemma-3-270m file when `LABFY_TEST_GGUF`
//! names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use labfy_governor::gguf::testing::{GgufBuilder, ModelShape, Value, model};
use labfy_governor::gguf::{self, GgufError, MAX_KV_COUNT, read_header};

const GIB: u64 = 1024 * 1024 * 1024;

fn write(b: &GgufBuilder) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    b.write_sparse(&path).unwrap();
    (dir, path)
}

/// A 7B-llama-shaped F16 model: 32 blocks, 4096 wide, 32,000 tokens.
fn llama_7b() -> ModelShape {
    ModelShape {
        arch: "llama".into(),
        blocks: 32,
        embd: 4096,
        heads: 32,
        heads_kv: 32,
        head_dim: None,
        ff: 11_008,
        vocab: 32_000,
        ctx_train: 4096,
        weight_type: 1,
        sliding_window: None,
        tied_output: false,
        tokens: true,
    }
}

#[test]
fn sparse_multi_gb_model_header_only() {
    let b = model(&llama_7b());
    let (_dir, path) = write(&b);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 12 * GIB, "{len}");
    let t = Instant::now();
    let h = read_header(&path).unwrap();
    // Printed, not asserted (a timed assertion would be flaky on a busy
    // box); the benchmark measures it.
    println!("parsed the header of a {len}-byte file in {:?}", t.elapsed());
    assert_eq!(h.architecture, "llama");
    assert_eq!(h.block_count, 32);
    assert_eq!(h.tensors.len(), 1 + 32 * 9 + 2);
    assert_eq!(h.vocab_size, Some(32_000));
    assert_eq!(h.file_size, len);
    // 6.74e9 parameters, the norms' 266,240 in f32, the rest in f16: the
    // file's data section exactly.
    assert_eq!(h.weights_bytes(), len - h.tensor_data_offset);
    assert_eq!(h.weights_bytes(), 2 * 6_738_415_616 + 2 * 266_240);
    // KV: 32 layers x 2 x 4096 x 2 bytes per cell = 512 KiB per cell.
    let e = h.estimate(4096, 0);
    assert_eq!(e.kv_cache, 4096 * 512 * 1024);
    assert_eq!(e.context, 4096);
    assert!(e.ram > e.weights + e.kv_cache && e.vram == 0);
    // All layers on the GPU: the input embedding alone stays in RAM.
    let g = h.estimate(4096, 33);
    assert_eq!(g.weights_on_gpu, e.weights - 2 * 4096 * 32_000);
    assert!(g.vram > g.weights_on_gpu + g.kv_cache);
}

#[test]
fn a_262k_token_vocabulary_is_skipped_not_collected() {
    let shape = ModelShape {
        arch: "gemma3".into(),
        blocks: 2,
        embd: 64,
        heads: 4,
        heads_kv: 1,
        head_dim: Some(256),
        ff: 128,
        vocab: 262_144,
        ctx_train: 32_768,
        weight_type: 0,
        sliding_window: Some(512),
        tied_output: true,
        tokens: true,
    };
    let (_dir, path) = write(&model(&shape));
    let t = Instant::now();
    let h = read_header(&path).unwrap();
    println!("parsed a 262,144-token header in {:?}", t.elapsed());
    assert_eq!(h.vocab_size, Some(262_144));
    assert_eq!(h.key_length, Some(256));
    assert_eq!(h.sliding_window, Some(512));
    assert_eq!(h.swa_layers, vec![true, true]);
}

#[test]
fn truncations_of_a_model_file_all_fail_cleanly() {
    let bytes = model(&ModelShape::tiny()).to_bytes();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    let header = read_header(&{
        std::fs::write(&path, &bytes).unwrap();
        path.clone()
    })
    .unwrap()
    .tensor_data_offset as usize;
    // Every 7th byte of the header, every 4099th of the data, the last one.
    let mut cuts: Vec<usize> = (0..header).step_by(7).chain((header..bytes.len()).step_by(4099)).collect();
    cuts.push(bytes.len() - 1);
    for cut in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        match read_header(&path) {
            Err(GgufError::Truncated { .. } | GgufError::Lies(_)) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn kv_count_at_the_bound_is_read() {
    let mut b = GgufBuilder::new("llama")
        .kv("llama.block_count", Value::U32(0))
        .kv("llama.embedding_length", Value::U32(8))
        .kv("llama.context_length", Value::U32(64));
    for i in b.kvs.len() as u64..MAX_KV_COUNT {
        b = b.kv(&format!("k{i}"), Value::U8(0));
    }
    let (_dir, path) = write(&b);
    assert_eq!(read_header(&path).unwrap().kv_count, MAX_KV_COUNT);
    let mut over = b.clone();
    over.kv_count = Some(MAX_KV_COUNT + 1);
    let (_dir, path) = write(&over);
    assert!(matches!(read_header(&path), Err(GgufError::TooLarge { what: "metadata KV count", .. })));
}

#[test]
fn bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(read_header(dir.path()), Err(GgufError::NotRegularFile { .. })));
    assert!(matches!(read_header(Path::new("/dev/null")), Err(GgufError::NotRegularFile { .. })));
    assert!(matches!(read_header(&dir.path().join("none")), Err(GgufError::Io { .. })));
    let not = dir.path().join("not.gguf");
    std::fs::write(&not, b"PK\x03\x04 a zip, not a model").unwrap();
    assert!(matches!(read_header(&not), Err(GgufError::NotGguf { .. })));
}

/// The real model (notes/llama-server.md): gemma-3-270m Q4_K_M, 253,113,024
/// bytes. Skipped, with the reason printed, without `LABFY_TEST_GGUF`.
#[test]
fn real_gemma3_270m() {
    let Some(path) = std::env::var_os("LABFY_TEST_GGUF") else {
        println!("skipped: LABFY_TEST_GGUF is not set (the path of gemma-3-270m-q4_k_m.gguf)");
        return;
    };
    let t = Instant::now();
    let h = read_header(Path::new(&path)).unwrap();
    println!("parsed {} in {:?}", Path::new(&path).display(), t.elapsed());
    assert_eq!(h.architecture, "gemma3");
    assert_eq!(h.block_count, 18);
    assert_eq!(h.tensors.len(), 236);
    assert!(h.weights_bytes() <= h.file_size - h.tensor_data_offset);
    assert!(h.weights_bytes() > h.file_size / 10 * 9);
    let types = h.tensors.iter().fold(std::collections::BTreeMap::<&str, u64>::new(), |mut m, t| {
        *m.entry(gguf::ggml_type(t.ggml_type).unwrap().name).or_default() += t.bytes;
        m
    });
    println!("header: {h:#?}", h = HeaderSummary(&h));
    println!("bytes by type: {types:?}");
    let e = h.estimate(2048, 0);
    println!("estimate -c 2048 -ngl 0: {e:#?}");
    println!("estimate -c 2048 -ngl 99: {:#?}", h.estimate(2048, 99));
    let e0 = h.estimate(0, 0);
    println!("estimate -c 0 (training context {}): {e0:#?}", h.context_length);
    assert_eq!(e.context, 2048);
    assert_eq!(e.server_args(), ["--cache-ram", "36", "--ctx-checkpoints", "2"]);
    // Measured on this model (`-c 2048 -t 2 --cache-ram 36 --ctx-checkpoints
    // 2`, cold page cache, 30 requests of 20 to 1,570 prompt tokens): a
    // memory cgroup peak of 461.5 MB. The estimate must be within 25 %.
    let measured = 461_500_000f64;
    let ratio = e.ram as f64 / measured;
    println!("estimate / measured peak = {ratio:.3}");
    assert!((0.75..=1.25).contains(&ratio), "{ratio}");
}

/// Every GGUF file of a directory (`LABFY_TEST_GGUF_DIR`, e.g. llama.cpp's
/// `models/` with its vocabulary-only files) parses or is refused cleanly.
#[test]
fn a_directory_of_real_gguf_files() {
    let Some(dir) = std::env::var_os("LABFY_TEST_GGUF_DIR") else {
        println!("skipped: LABFY_TEST_GGUF_DIR is not set");
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "gguf") {
            let h = read_header(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            println!("{}: {} with {} tensors", path.display(), h.architecture, h.tensors.len());
            n += 1;
        }
    }
    println!("{n} files parsed");
}

/// The header without its 236 tensor infos.
struct HeaderSummary<'a>(&'a gguf::GgufHeader);

impl std::fmt::Debug for HeaderSummary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h = self.0;
        f.debug_struct("GgufHeader")
            .field("version", &h.version)
            .field("architecture", &h.architecture)
            .field("block_count", &h.block_count)
            .field("embedding_length", &h.embedding_length)
            .field("head_count", &h.head_count)
            .field("head_count_kv", &h.head_count_kv)
            .field("context_length", &h.context_length)
            .field("key_length", &h.key_length)
            .field("value_length", &h.value_length)
            .field("sliding_window", &h.sliding_window)
            .field("feed_forward_length", &h.feed_forward_length)
            .field("swa_layers", &h.swa_layers.iter().filter(|s| **s).count())
            .field("vocab_size", &h.vocab_size)
            .field("kv_count", &h.kv_count)
            .field("tensors", &h.tensors.len())
            .field("tensor_data_offset", &h.tensor_data_offset)
            .field("file_size", &h.file_size)
            .finish()
    }
}

/// The in-memory reader (the fuzz target's) agrees with the file reader, and
/// refuses a header cut short.
#[test]
fn a_header_in_memory_reads_as_the_file_does() {
    let built = model(&ModelShape::tiny());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let len = built.write_sparse(&path).unwrap();
    let from_file = read_header(&path).unwrap();
    let header = built.header_bytes();
    let from_bytes = gguf::header_from_bytes(&header, len).unwrap();
    assert_eq!(from_bytes.architecture, from_file.architecture);
    assert_eq!(from_bytes.tensors.len(), from_file.tensors.len());
    assert_eq!(from_bytes.tensor_data_offset, from_file.tensor_data_offset);
    assert_eq!(from_bytes.file_size, len);
    let cut = gguf::header_from_bytes(&header[..header.len() / 2], len).unwrap_err();
    assert!(!cut.to_string().is_empty());
}
