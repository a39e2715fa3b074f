//! Unit tests of the reader (every bad-input case, every named bound at N
//! and N + 1) and of the estimate on synthetic headers (exact numbers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use super::estimate::{
    ACT_FLOATS_PER_EMBD, ACT_FLOATS_PER_FF, DEFAULT_CTX_CHECKPOINTS, GPU_RUNTIME_BYTES, KV_ELEMENT_BYTES,
    RUNTIME_RAM_BYTES, VOCAB_RAM_BYTES_PER_TOKEN,
};
use super::parse::{MAX_KEPT_KEYS, vt};
use super::testing::{GgufBuilder, ModelShape, Value, model};
use super::*;

fn parse_bytes(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
    read_header(f.path())
}

fn parse(b: &GgufBuilder) -> Result<GgufHeader, GgufError> {
    parse_bytes(&b.to_bytes())
}

/// A minimal valid file: the architecture keys and one F32 tensor.
fn minimal() -> GgufBuilder {
    GgufBuilder::new("llama")
        .kv("llama.block_count", Value::U32(1))
        .kv("llama.embedding_length", Value::U32(8))
        .kv("llama.context_length", Value::U32(128))
        .kv("llama.attention.head_count", Value::U32(2))
        .tensor("blk.0.attn_q.weight", &[8, 8], 0)
}

fn too_large(r: Result<GgufHeader, GgufError>, what: &str) {
    match r {
        Err(GgufError::TooLarge { what: w, .. }) => assert_eq!(w, what),
        other => panic!("expected TooLarge({what}), got {other:?}"),
    }
}

fn malformed(r: Result<GgufHeader, GgufError>, needle: &str) {
    match r {
        Err(GgufError::Malformed(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("expected Malformed({needle}), got {other:?}"),
    }
}

fn lies(r: Result<GgufHeader, GgufError>) {
    assert!(matches!(r, Err(GgufError::Lies(_))), "expected Lies, got {r:?}");
}

fn truncated(r: Result<GgufHeader, GgufError>) {
    assert!(matches!(r, Err(GgufError::Truncated { .. })), "expected Truncated, got {r:?}");
}

// ---- parsing ----

#[test]
fn tiny_model_round_trips() {
    let b = model(&ModelShape::tiny());
    let h = parse(&b).unwrap();
    assert_eq!(h.version, 3);
    assert_eq!(h.architecture, "llama");
    assert_eq!((h.block_count, h.embedding_length, h.context_length), (4, 64, 4096));
    assert_eq!((h.head_count, h.head_count_kv), (4, 2));
    assert_eq!(h.head_count_kv_per_layer, vec![2; 4]);
    assert_eq!((h.key_length, h.value_length, h.sliding_window), (None, None, None));
    assert_eq!(h.feed_forward_length, Some(128));
    assert_eq!(h.vocab_size, Some(256));
    assert_eq!(h.swa_layers, vec![false; 4]);
    assert_eq!(h.alignment, 32);
    assert_eq!(h.kv_count, b.kvs.len() as u64);
    // 1 + 9 per block + 2 tensors.
    assert_eq!(h.tensors.len(), 1 + 4 * 9 + 2);
    let (offsets, data_len) = b.layout();
    for (t, o) in h.tensors.iter().zip(&offsets) {
        assert_eq!(t.offset, *o, "{}", t.name);
    }
    assert_eq!(h.tensor_data_offset, b.header_bytes().len() as u64);
    assert_eq!(h.tensor_data_offset % 32, 0);
    assert_eq!(h.file_size, h.tensor_data_offset + data_len);
    let q = h.tensors.iter().find(|t| t.name == "blk.2.attn_q.weight").unwrap();
    assert_eq!((q.dims.clone(), q.ggml_type, q.bytes, q.block()), (vec![64, 64], 0, 64 * 64 * 4, Some(2)));
    // F32 everywhere, 4 bytes per parameter. Per block: 2 norms of 64,
    // q and o 64 x 64, k and v 64 x 32, gate, up and down 64 x 128; then
    // token_embd and output 64 x 256 and output_norm 64.
    let per_block = 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128;
    assert_eq!(per_block, 36_992);
    assert_eq!(h.weights_bytes(), 4 * (4 * per_block + 2 * 64 * 256 + 64));
    assert_eq!(h.weights_bytes(), 723_200);
    assert_eq!(h.weights_bytes(), h.tensors.iter().map(|t| t.bytes).sum::<u64>());
}

#[test]
fn version_2_is_read_1_and_4_are_refused() {
    let mut b = minimal();
    b.version = 2;
    assert_eq!(parse(&b).unwrap().version, 2);
    for v in [0, 1, 4, 5, u32::MAX] {
        b.version = v;
        match parse(&b) {
            Err(GgufError::UnsupportedVersion { version }) => assert_eq!(version, v),
            other => panic!("version {v}: {other:?}"),
        }
    }
    // A big-endian v3 file reads as 0x03000000.
    b.version = 3u32.swap_bytes();
    let msg = parse(&b).unwrap_err().to_string();
    assert!(msg.contains("big-endian"), "{msg}");
}

#[test]
fn not_gguf() {
    let mut b = minimal();
    b.magic = *b"GGML";
    assert!(matches!(parse(&b), Err(GgufError::NotGguf { found }) if &found == b"GGML"));
    assert!(matches!(parse_bytes(b"\x7fELF\x02\x01\x01\0"), Err(GgufError::NotGguf { .. })));
    truncated(parse_bytes(b""));
    truncated(parse_bytes(b"GGU"));
}

#[test]
fn truncated_at_every_header_offset_and_through_the_data() {
    let bytes = model(&ModelShape::tiny()).to_bytes();
    let header_len = parse_bytes(&bytes).unwrap().tensor_data_offset as usize;
    let cuts = (0..=header_len + 64).chain((header_len + 64..bytes.len()).step_by(997));
    for cut in cuts {
        match parse_bytes(&bytes[..cut]) {
            Err(GgufError::Truncated { file_size, .. }) => assert_eq!(file_size, cut as u64),
            // Cut inside the magic.
            Err(GgufError::NotGguf { .. }) => panic!("cut {cut}: magic misread"),
            // A cut count field may read as an absurd length: also refused.
            Err(GgufError::Lies(_) | GgufError::TooLarge { .. }) => {}
            other => panic!("cut {cut} of {}: {other:?}", bytes.len()),
        }
    }
    assert!(parse_bytes(&bytes).is_ok());
}

#[test]
fn counts_that_lie_and_counts_over_the_bounds() {
    let mut b = minimal();
    b.kv_count = Some(MAX_KV_COUNT);
    lies(parse(&b));
    b.kv_count = Some(MAX_KV_COUNT + 1);
    too_large(parse(&b), "metadata KV count");
    b.kv_count = Some(u64::MAX);
    too_large(parse(&b), "metadata KV count");
    let mut b = minimal();
    b.tensor_count = Some(MAX_TENSOR_COUNT);
    lies(parse(&b));
    b.tensor_count = Some(MAX_TENSOR_COUNT + 1);
    too_large(parse(&b), "tensor count");
    // One KV more than written: the next read runs into the tensor infos and
    // then the end.
    let mut b = minimal();
    b.kv_count = Some(b.kvs.len() as u64 + 1);
    assert!(parse(&b).is_err());
}

#[test]
fn tensor_count_at_the_bound_is_read() {
    let mut b = GgufBuilder::new("llama")
        .kv("llama.block_count", Value::U32(0))
        .kv("llama.embedding_length", Value::U32(8))
        .kv("llama.context_length", Value::U32(128));
    for i in 0..MAX_TENSOR_COUNT {
        b = b.tensor(&format!("t{i}"), &[1], 0);
    }
    let h = parse(&b).unwrap();
    assert_eq!(h.tensors.len() as u64, MAX_TENSOR_COUNT);
    assert_eq!(h.weights_bytes(), 4 * MAX_TENSOR_COUNT);
}

#[test]
fn array_lengths_that_lie() {
    for (elem, len) in [(vt::U32, 1u64 << 40), (vt::STRING, 1 << 30), (vt::ARRAY, 1 << 30), (vt::U8, u64::MAX)] {
        let mut payload = elem.to_le_bytes().to_vec();
        payload.extend(len.to_le_bytes());
        let b = minimal().kv("x.lie", Value::Raw(vt::ARRAY, payload));
        lies(parse(&b));
    }
    // The tokenizer's list is checked the same way.
    let mut payload = vt::STRING.to_le_bytes().to_vec();
    payload.extend((1u64 << 40).to_le_bytes());
    lies(parse(&minimal().kv("tokenizer.ggml.tokens", Value::Raw(vt::ARRAY, payload))));
}

#[test]
fn string_bound_at_n_and_n_plus_1() {
    let n = MAX_STRING_BYTES as usize;
    let ok = minimal().kv("general.chat_template", Value::Str("x".repeat(n)));
    assert!(parse(&ok).is_ok());
    let over = minimal().kv("general.chat_template", Value::Str("x".repeat(n + 1)));
    too_large(parse(&over), "metadata string");
    // In a skipped array too.
    let over = minimal().kv("x.strings", Value::strings(["a".to_string(), "x".repeat(n + 1)]));
    too_large(parse(&over), "metadata string");
    // A length that is a lie (past the end) is a truncation.
    let mut raw = 100u64.to_le_bytes().to_vec();
    raw.extend(b"short");
    truncated(parse_bytes(&minimal().kv("x.s", Value::Raw(vt::STRING, raw)).header_unpadded()));
}

#[test]
fn key_bound_at_n_and_n_plus_1() {
    let n = MAX_KEY_BYTES as usize;
    assert!(parse(&minimal().kv(&"k".repeat(n), Value::U8(1))).is_ok());
    too_large(parse(&minimal().kv(&"k".repeat(n + 1), Value::U8(1))), "metadata key");
    malformed(parse(&minimal().kv("", Value::U8(1))), "empty");
}

#[test]
fn tensor_name_bound_at_n_and_n_plus_1() {
    let n = MAX_TENSOR_NAME_BYTES as usize;
    assert!(parse(&minimal().tensor(&"n".repeat(n), &[4], 0)).is_ok());
    too_large(parse(&minimal().tensor(&"n".repeat(n + 1), &[4], 0)), "tensor name");
}

#[test]
fn dims_bound_at_n_and_n_plus_1() {
    let h = parse(&minimal().tensor("four", &[2, 2, 2, 2], 0)).unwrap();
    assert_eq!(h.tensors[1].bytes, 64);
    too_large(parse(&minimal().tensor("five", &[2, 2, 2, 2, 2], 0)), "tensor dimension count");
    // No dimension: a scalar.
    assert_eq!(parse(&minimal().tensor("scalar", &[], 0)).unwrap().tensors[1].bytes, 4);
}

#[test]
fn block_count_bound_at_n_and_n_plus_1() {
    let with = |n: u32| {
        GgufBuilder::new("llama")
            .kv("llama.block_count", Value::U32(n))
            .kv("llama.embedding_length", Value::U32(8))
            .kv("llama.context_length", Value::U32(128))
    };
    assert_eq!(parse(&with(MAX_BLOCK_COUNT)).unwrap().swa_layers.len(), MAX_BLOCK_COUNT as usize);
    too_large(parse(&with(MAX_BLOCK_COUNT + 1)), "block count");
}

/// `depth` arrays nested in each other, the innermost of one u8.
fn nested(depth: u32) -> Value {
    let mut v = Value::Array(vt::U8, vec![Value::U8(7)]);
    for _ in 1..depth {
        v = Value::Array(vt::ARRAY, vec![v]);
    }
    v
}

#[test]
fn nested_arrays_bound_at_n_and_n_plus_1() {
    assert!(parse(&minimal().kv("x.nested", nested(MAX_ARRAY_NESTING))).is_ok());
    too_large(parse(&minimal().kv("x.nested", nested(MAX_ARRAY_NESTING + 1))), "array nesting depth");
    // Arrays of strings inside arrays are skipped too.
    let v = Value::Array(vt::ARRAY, vec![Value::strings(["a", "bc"]), Value::strings(Vec::<String>::new())]);
    assert!(parse(&minimal().kv("x.nested_strings", v)).is_ok());
}

#[test]
fn kept_keys_bound_at_n_and_n_plus_1() {
    // `minimal` keeps 5 keys (architecture and 4 llama.*); fill up to the bound.
    let fill = |n: usize| {
        let mut b = minimal();
        for i in 0..n {
            b = b.kv(&format!("a{i}.block_count"), Value::U32(1));
        }
        b
    };
    assert!(parse(&fill(MAX_KEPT_KEYS - 5)).is_ok());
    too_large(parse(&fill(MAX_KEPT_KEYS - 4)), "architecture metadata keys");
}

#[test]
fn header_bytes_bound_at_n_and_n_plus_1() {
    // A u8 array (skipped in one seek) pads the header to exactly the bound;
    // the file is sparse.
    let sized = |target: u64| {
        let base = minimal().kv("x.pad", Value::Array(vt::U8, vec![]));
        let len = target - base.header_unpadded().len() as u64;
        let mut b = minimal();
        let mut payload = vt::U8.to_le_bytes().to_vec();
        payload.extend(len.to_le_bytes());
        b = b.kv("x.pad", Value::Raw(vt::ARRAY, payload));
        // The raw payload omits the array's bytes: write them as a hole.
        let mut header = b.header_unpadded();
        let cut =
            header.len() - b.tensors.iter().map(|t| 8 + t.name.len() + 4 + 8 * t.dims.len() + 4 + 8).sum::<usize>();
        let infos = header.split_off(cut);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.gguf");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&header).unwrap();
        f.set_len(header.len() as u64 + len).unwrap();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::End(0)).unwrap();
        f.write_all(&infos).unwrap();
        let end = header.len() as u64 + len + infos.len() as u64;
        assert_eq!(end, target);
        // The tensor data: 256 bytes after the aligned end.
        f.set_len(end.div_ceil(32) * 32 + 256).unwrap();
        drop(f);
        let r = read_header(&path);
        (r, dir)
    };
    let (r, _d) = sized(MAX_HEADER_BYTES);
    assert_eq!(r.unwrap().tensor_data_offset, MAX_HEADER_BYTES);
    let (r, _d) = sized(MAX_HEADER_BYTES + 1);
    too_large(r, "GGUF header (metadata and tensor infos)");
}

#[test]
fn unknown_value_types() {
    malformed(parse(&minimal().kv("x.bad", Value::Raw(13, vec![0; 8]))), "unknown value type 13");
    let mut payload = 99u32.to_le_bytes().to_vec();
    payload.extend(1u64.to_le_bytes());
    malformed(parse(&minimal().kv("x.bad", Value::Raw(vt::ARRAY, payload))), "unknown value type 99");
    let bad_utf8 = Value::Raw(vt::STRING, [2u64.to_le_bytes().as_slice(), &[0xff, 0xfe]].concat());
    malformed(parse(&minimal().kv("llama.attention.key_length", bad_utf8)), "UTF-8");
}

#[test]
fn tensor_types_and_shapes() {
    malformed(parse(&minimal().tensor("x", &[32], 99)), "tensor x has unknown ggml type 99");
    malformed(parse(&minimal().tensor("x", &[32], 4)), "unknown ggml type 4");
    malformed(parse(&minimal().tensor("q", &[48, 2], 2)), "not a multiple of its block size 32");
    malformed(parse(&minimal().tensor("huge", &[1 << 40, 1 << 40], 0)), "overflows");
    malformed(parse(&minimal().tensor("neg", &[u64::MAX], 0)), "negative dimension");
    let h = parse(&minimal().tensor("q4k", &[512, 3], 12)).unwrap();
    assert_eq!(h.tensors[1].bytes, 2 * 144 * 3);
}

#[test]
fn tensor_extents() {
    // Misaligned.
    malformed(parse(&minimal().tensor_at("x", &[4], 0, 48)), "not a multiple of the alignment 32");
    // Overlapping: x covers 256..512, y starts at 288.
    lies(parse(&minimal().tensor_at("x", &[64], 0, 256).tensor_at("y", &[8], 0, 288)));
    // Past the end of the file (the header is honest, the data is cut).
    let b = minimal().tensor("x", &[1024], 0);
    let bytes = b.to_bytes();
    truncated(parse_bytes(&bytes[..bytes.len() - 1]));
    // An offset that overflows (the file itself is small).
    let mut bytes = minimal().tensor_at("x", &[4], 0, !31).header_bytes();
    bytes.resize(bytes.len() + 256, 0);
    lies(parse_bytes(&bytes));
    // Duplicate names.
    malformed(parse(&minimal().tensor("blk.0.attn_q.weight", &[4], 0)), "duplicate tensor name");
}

#[test]
fn alignment() {
    let b = minimal().alignment(64).tensor("x", &[5], 0).tensor("y", &[5], 0);
    let h = parse(&b).unwrap();
    assert_eq!(h.alignment, 64);
    assert_eq!(h.tensor_data_offset % 64, 0);
    // blk.0.attn_q (256 bytes) at 0, then 20-byte x and y at multiples of 64.
    assert_eq!(h.tensors.iter().map(|t| t.offset).collect::<Vec<_>>(), vec![0, 256, 320]);
    malformed(parse(&minimal().kv("general.alignment", Value::U32(48))), "power of two");
    malformed(parse(&minimal().kv("general.alignment", Value::U32(0))), "power of two");
    malformed(parse(&minimal().kv("general.alignment", Value::Str("32".into()))), "power of two");
}

#[test]
fn required_and_duplicate_keys() {
    let no_arch = GgufBuilder::empty().kv("llama.block_count", Value::U32(1));
    malformed(parse(&no_arch), "general.architecture is missing");
    malformed(parse(&GgufBuilder::new("llama")), "llama.block_count is missing");
    malformed(parse(&minimal().kv("llama.block_count", Value::U32(2))), "duplicate metadata key");
    malformed(parse(&GgufBuilder::new("llama").kv("llama.block_count", Value::I32(-1))), "not a u32");
    malformed(parse(&GgufBuilder::new("llama").kv("llama.block_count", Value::Str("1".into()))), "not a u32");
    // Keys of other architectures are read but not used.
    let h = parse(&minimal().kv("qwen3.block_count", Value::U32(99))).unwrap();
    assert_eq!(h.block_count, 1);
}

#[test]
fn per_layer_head_counts() {
    let b = minimal()
        .kv("llama.attention.head_count_kv", Value::Array(vt::I32, vec![Value::I32(4)]))
        .kv("llama.feed_forward_length", Value::u32s(&[96]));
    let h = parse(&b).unwrap();
    assert_eq!((h.head_count_kv, h.head_count_kv_per_layer.clone(), h.feed_forward_length), (4, vec![4], Some(96)));
    // head_count_kv defaults to head_count.
    assert_eq!(parse(&minimal()).unwrap().head_count_kv, 2);
    let mut b = GgufBuilder::new("x")
        .kv("x.block_count", Value::U32(3))
        .kv("x.embedding_length", Value::U32(8))
        .kv("x.context_length", Value::U32(8))
        .kv("x.attention.head_count", Value::u32s(&[4, 0, 8]))
        .kv("x.attention.head_count_kv", Value::u32s(&[2, 0, 1]));
    let h = parse(&b).unwrap();
    assert_eq!((h.head_count, h.head_count_kv), (8, 2));
    assert_eq!(h.head_count_kv_per_layer, vec![2, 0, 1]);
    b = b.kv("x.feed_forward_length", Value::u32s(&[1, 2]));
    malformed(parse(&b), "2 entries for 3 blocks");
}

/// A gemma3-shaped header (the real 270m's hyper-parameters: 18 blocks,
/// 640 wide, 4 heads, 1 KV head of 256, a 512-token window), no tensors.
fn gemma3_like() -> GgufBuilder {
    GgufBuilder::new("gemma3")
        .kv("gemma3.block_count", Value::U32(18))
        .kv("gemma3.embedding_length", Value::U32(640))
        .kv("gemma3.context_length", Value::U32(32_768))
        .kv("gemma3.attention.head_count", Value::U32(4))
        .kv("gemma3.attention.head_count_kv", Value::U32(1))
        .kv("gemma3.attention.key_length", Value::U32(256))
        .kv("gemma3.attention.value_length", Value::U32(256))
        .kv("gemma3.attention.sliding_window", Value::U32(512))
}

#[test]
fn sliding_window_layers() {
    let h = parse(&gemma3_like()).unwrap();
    // Period 6, the last of each period is global: layers 5, 11, 17.
    let global: Vec<usize> = h.swa_layers.iter().enumerate().filter(|(_, s)| !**s).map(|(i, _)| i).collect();
    assert_eq!(global, vec![5, 11, 17]);
    assert_eq!(h.sliding_window, Some(512));
    // An explicit period.
    let h = parse(&gemma3_like().kv("gemma3.attention.sliding_window_pattern", Value::U32(3))).unwrap();
    assert_eq!(h.swa_layers.iter().filter(|s| !**s).count(), 6);
    // An explicit bool per layer.
    let bools = Value::Array(vt::BOOL, (0..18).map(|i| Value::Bool(i % 2 == 0)).collect());
    let h = parse(&gemma3_like().kv("gemma3.attention.sliding_window_pattern", bools)).unwrap();
    assert_eq!(h.swa_layers.iter().filter(|s| **s).count(), 9);
    let bad = Value::Array(vt::BOOL, (0..18).map(|i| Value::Raw(vt::BOOL, vec![if i == 3 { 2 } else { 0 }])).collect());
    assert!(parse(&gemma3_like().kv("gemma3.attention.sliding_window_pattern", bad)).is_err());
    // An unknown architecture with a window: full caches everywhere.
    let h = parse(&minimal().kv("llama.attention.sliding_window", Value::U32(64))).unwrap();
    assert_eq!(h.swa_layers, vec![false]);
    // A window of 0 is none.
    let h = parse(&minimal().kv("llama.attention.sliding_window", Value::U32(0))).unwrap();
    assert_eq!(h.sliding_window, None);
}

#[test]
fn not_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(read_header(dir.path()), Err(GgufError::NotRegularFile { .. })));
    assert!(matches!(read_header(Path::new("/dev/null")), Err(GgufError::NotRegularFile { .. })));
    assert!(matches!(read_header(Path::new("/dev/zero")), Err(GgufError::NotRegularFile { .. })));
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
    if made {
        // Refused at once: opening a FIFO would wait for a writer.
        assert!(matches!(read_header(&fifo), Err(GgufError::NotRegularFile { .. })));
    }
    match read_header(&dir.path().join("absent.gguf")) {
        Err(e @ GgufError::Io { .. }) => assert!(e.to_string().contains("absent.gguf")),
        other => panic!("{other:?}"),
    }
    // Through a symlink and a /proc/self/fd path (as the supervisor reads it).
    let real = dir.path().join("m.gguf");
    std::fs::write(&real, minimal().to_bytes()).unwrap();
    let link = dir.path().join("link.gguf");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(read_header(&link).is_ok());
    let f = std::fs::File::open(&real).unwrap();
    use std::os::fd::AsRawFd;
    assert!(read_header(Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd()))).is_ok());
}

// ---- estimate ----

/// Launch parameters without the host-dependent CPU repacking.
fn plain() -> LaunchParams {
    LaunchParams { cpu_repack: false, ..LaunchParams::default() }
}

/// The tiny model in F32: per block 4 + 64 + 3 × 8192 + 2 × 2048 … bytes.
fn tiny() -> GgufHeader {
    parse(&model(&ModelShape::tiny())).unwrap()
}

fn block_bytes(h: &GgufHeader, b: u32) -> u64 {
    h.tensors.iter().filter(|t| t.block() == Some(b)).map(|t| t.bytes).sum()
}

fn named(h: &GgufHeader, name: &str) -> u64 {
    h.tensors.iter().find(|t| t.name == name).map(|t| t.bytes).unwrap()
}

#[test]
fn kv_cache_exact() {
    let h = tiny();
    // head_dim 64 / 4 = 16; 2 KV heads; K and V; f16; 4 layers.
    let per_cell = (16 + 16) * 2 * KV_ELEMENT_BYTES * 4;
    assert_eq!(h.estimate_with(2048, 0, &plain()).kv_cache, per_cell * 2048);
    // 1000 is padded to 1024 cells.
    let e = h.estimate_with(1000, 0, &plain());
    assert_eq!((e.context, e.kv_cache), (1024, per_cell * 1024));
    // 0: the training context; larger than training: not clamped.
    assert_eq!(h.estimate_with(0, 0, &plain()).context, 4096);
    assert_eq!(h.estimate_with(8192, 0, &plain()).kv_cache, per_cell * 8192);
    // Each sequence its own cache (-np 4 without --kv-unified): 1000/4 -> 256 each.
    let split = LaunchParams { kv_unified: false, ..plain() };
    assert_eq!(h.estimate_with(1000, 0, &split).kv_cache, per_cell * 1024);
}

#[test]
fn kv_cache_with_sliding_windows_exact() {
    let h = parse(&gemma3_like()).unwrap();
    // Per cell and layer: (256 + 256) x 1 head x 2 bytes = 1 KiB.
    let per_cell_layer = 1024;
    // ctx 2048: SWA cells = pad256(min(2048, 512 x 4 + 512)) = 2048: no saving.
    assert_eq!(h.estimate_with(2048, 0, &plain()).kv_cache, 18 * 2048 * per_cell_layer);
    // ctx 32768: 15 SWA layers at pad256(512 x 4 + 512) = 2560 cells, 3 at 32768.
    let e = h.estimate_with(32_768, 0, &plain());
    assert_eq!(e.kv_cache, (15 * 2560 + 3 * 32_768) * per_cell_layer);
    // --swa-full: every layer full.
    let full = LaunchParams { swa_full: true, ..plain() };
    assert_eq!(h.estimate_with(32_768, 0, &full).kv_cache, 18 * 32_768 * per_cell_layer);
    // One sequence (-np 1): 512 + 512 = 1024 cells.
    let one = LaunchParams { n_parallel: 1, ..plain() };
    assert_eq!(h.estimate_with(32_768, 0, &one).kv_cache, (15 * 1024 + 3 * 32_768) * per_cell_layer);
}

/// The tiny model's compute buffer at -c 2048: activations of 512 tokens
/// (2 x 64 + 3 x 128 floats each), one f16 mask 2048 x 512, logits of 4
/// outputs over 256 tokens.
const TINY_ACTIVATIONS: u64 = 512 * 4 * (ACT_FLOATS_PER_EMBD * 64 + ACT_FLOATS_PER_FF * 128);
const TINY_MASKS: u64 = 512 * 2 * 2048;
const TINY_LOGITS: u64 = 256 * 4 * 4;
/// Its KV cache at -c 2048 (1 MiB), hence a 1 MiB prompt cache.
const TINY_KV: u64 = (16 + 16) * 2 * 2 * 4 * 2048;

#[test]
fn estimate_on_the_cpu_exact() {
    assert_eq!(TINY_ACTIVATIONS, 1_048_576);
    assert_eq!(TINY_KV, 1 << 20);
    let h = tiny();
    let e = h.estimate_with(2048, 0, &plain());
    let compute = TINY_ACTIVATIONS + TINY_MASKS + TINY_LOGITS;
    // Runtime, vocabulary, host output buffer, prompt cache (1 MiB), no
    // checkpoints (no sliding window), compute buffer.
    let overhead = RUNTIME_RAM_BYTES + 256 * VOCAB_RAM_BYTES_PER_TOKEN + TINY_LOGITS + (1 << 20) + compute;
    assert_eq!(
        e,
        Estimate {
            weights: h.weights_bytes(),
            weights_on_gpu: 0,
            weights_repacked: 0,
            kv_cache: TINY_KV,
            overhead,
            vram: 0,
            // The whole file is mapped, header included.
            ram: h.file_size + TINY_KV + overhead,
            context: 2048,
            cache_ram_mib: 1,
            ctx_checkpoints: DEFAULT_CTX_CHECKPOINTS,
        }
    );
    assert_eq!(e.server_args(), ["--cache-ram", "1", "--ctx-checkpoints", "2"]);
    // An explicit prompt cache bound is what is reserved and passed.
    let e = h.estimate_with(2048, 0, &LaunchParams { cache_ram_mib: Some(64), ctx_checkpoints: 0, ..plain() });
    assert_eq!(e.ram, h.file_size + TINY_KV + overhead - (1 << 20) + (64 << 20));
    assert_eq!(e.server_args(), ["--cache-ram", "64", "--ctx-checkpoints", "0"]);
}

#[test]
fn estimate_with_sliding_windows_exact() {
    let h = parse(&gemma3_like()).unwrap();
    let e = h.estimate_with(2048, 0, &plain());
    let kv = 18 * 2048 * 1024;
    // Checkpoints: 4 slots x 2 x the window's 512 cells of the 15 SWA
    // layers (1 KiB a cell).
    let checkpoints = 4 * 2 * 512 * 15 * 1024;
    // No feed-forward length: 4 x 640 assumed; two masks (full and SWA).
    let compute = 512 * 4 * (ACT_FLOATS_PER_EMBD * 640 + ACT_FLOATS_PER_FF * 2560) + 512 * 2 * (2048 + 2048);
    assert_eq!(e.cache_ram_mib, 36);
    assert_eq!(e.ram, h.file_size + kv + RUNTIME_RAM_BYTES + (36 << 20) + checkpoints + compute);
    // At 32,768 the SWA cache and its mask are 2,560 cells.
    let e = h.estimate_with(32_768, 0, &plain());
    let kv = (15 * 2560 + 3 * 32_768) * 1024;
    assert_eq!((e.kv_cache, e.cache_ram_mib), (kv, 134));
    let compute = 512 * 4 * (ACT_FLOATS_PER_EMBD * 640 + ACT_FLOATS_PER_FF * 2560) + 512 * 2 * (32_768 + 2560);
    assert_eq!(e.ram, h.file_size + kv + RUNTIME_RAM_BYTES + (134 << 20) + checkpoints + compute);
}

#[test]
fn gpu_layers_split() {
    let h = tiny();
    let p = plain();
    let weights = h.weights_bytes();
    let embd = named(&h, "token_embd.weight");
    let kv_layer = TINY_KV / 4;
    let compute = TINY_ACTIVATIONS + TINY_MASKS + TINY_LOGITS;
    let output = named(&h, "output.weight") + named(&h, "output_norm.weight");
    let e0 = h.estimate_with(2048, 0, &p);
    assert_eq!((e0.weights_on_gpu, e0.vram), (0, 0));
    // -ngl 1: the output layer only; the compute buffer with the logits on
    // the GPU, one without them on the CPU.
    let e1 = h.estimate_with(2048, 1, &p);
    assert_eq!(e1.weights_on_gpu, output);
    assert_eq!(e1.ram, e0.ram - output - TINY_LOGITS);
    assert_eq!(e1.vram, output + GPU_RUNTIME_BYTES + compute);
    // -ngl 3 (half of 4 blocks with the output): blocks 2 and 3 and their KV.
    let e3 = h.estimate_with(2048, 3, &p);
    let half = block_bytes(&h, 2) + block_bytes(&h, 3);
    assert_eq!(e3.weights_on_gpu, output + half);
    assert_eq!(e3.vram, output + half + 2 * kv_layer + GPU_RUNTIME_BYTES + compute);
    assert_eq!(e3.ram, e1.ram - half - 2 * kv_layer);
    // -ngl 4 = block_count: the output and blocks 1..3; block 0 stays.
    let e4 = h.estimate_with(2048, 4, &p);
    assert_eq!(e4.weights_on_gpu, weights - embd - block_bytes(&h, 0));
    assert_eq!(e4.ram, e1.ram - (weights - embd - block_bytes(&h, 0) - output) - 3 * kv_layer);
    // -ngl 5 = block_count + 1 and more: everything but the input embedding;
    // RAM keeps the file's header and embedding, runtime, vocabulary, output
    // buffer and prompt cache.
    let e5 = h.estimate_with(2048, 5, &p);
    assert_eq!(e5.weights_on_gpu, weights - embd);
    assert_eq!(e5.vram, weights - embd + TINY_KV + GPU_RUNTIME_BYTES + compute);
    let header = h.file_size - weights;
    assert_eq!(e5.ram, header + embd + RUNTIME_RAM_BYTES + 256 * VOCAB_RAM_BYTES_PER_TOKEN + TINY_LOGITS + (1 << 20));
    assert_eq!(e5, h.estimate_with(2048, 99, &p));
    assert_eq!(e5, h.estimate_with(2048, u32::MAX, &p));
    for e in [e0, e1, e3, e4, e5] {
        assert_eq!((e.weights, e.kv_cache), (weights, TINY_KV));
        assert!(e.vram + e.ram >= weights);
    }
}

#[test]
fn tied_output_is_a_second_copy_on_the_gpu() {
    let shape = ModelShape { tied_output: true, ..ModelShape::tiny() };
    let h = parse(&model(&shape)).unwrap();
    let embd = named(&h, "token_embd.weight");
    let e = h.estimate_with(2048, 1, &plain());
    assert_eq!(e.weights_on_gpu, embd + named(&h, "output_norm.weight"));
    // The file's bytes stay in RAM (the input embedding); the logits move.
    assert_eq!(e.ram, h.estimate_with(2048, 0, &plain()).ram - named(&h, "output_norm.weight") - TINY_LOGITS);
}

#[test]
fn cpu_repacking_counts_matrices_twice() {
    // Q4_K weights: 256-wide rows; embd 256, ff 512, 8 heads of 32, 4 KV heads.
    let shape =
        ModelShape { embd: 256, ff: 512, heads: 8, heads_kv: 8, vocab: 1024, weight_type: 12, ..ModelShape::tiny() };
    let h = parse(&model(&shape)).unwrap();
    let with = LaunchParams { cpu_repack: true, ..plain() };
    let e = h.estimate_with(2048, 0, &with);
    // Every 2-D Q4_K matrix but the input embedding: blocks' 7 matrices and output.
    let matrices: u64 =
        h.tensors.iter().filter(|t| t.ggml_type == 12 && t.name != "token_embd.weight").map(|t| t.bytes).sum();
    assert_eq!(e.weights_repacked, matrices);
    assert_eq!(e.ram, h.estimate_with(2048, 0, &plain()).ram + matrices);
    // Offloaded matrices are not repacked.
    assert_eq!(h.estimate_with(2048, 5, &with).weights_repacked, 0);
    // A tied Q4_K output is repacked on the CPU.
    let tied = parse(&model(&ModelShape { tied_output: true, ..shape })).unwrap();
    assert_eq!(
        tied.estimate_with(2048, 0, &with).weights_repacked,
        matrices - named(&h, "output.weight") + named(&tied, "token_embd.weight")
    );
}

#[test]
fn default_params_are_llama_servers() {
    let p = LaunchParams::default();
    assert_eq!((p.n_parallel, p.kv_unified, p.n_batch, p.n_ubatch, p.swa_full), (4, true, 2048, 512, false));
    assert_eq!((p.cache_ram_mib, p.ctx_checkpoints), (None, 2));
    let h = tiny();
    assert_eq!(h.estimate(2048, 3), h.estimate_with(2048, 3, &p));
}

/// Found by the fuzz smoke's dev build (overflow checks on): an array's
/// string whose length field is near 2^64, lying in the read buffer, made
/// the buffered skip add 8 to it before checking the bound — a panic in a
/// debug build, a wrapped sum in release. Now a refusal like any other.
/// The input is the fuzz target's (8 bytes of claimed file length, then the
/// file's first bytes).
#[test]
fn a_string_length_near_2_64_in_an_array_is_refused_not_overflowed() {
    let input = include_bytes!("../../tests/fixtures/gguf/string-length-near-2-64.fuzz");
    let (len, bytes) = input.split_at(8);
    let file_size = u64::from_le_bytes(len.try_into().unwrap()) % (1 << 40);
    let err = super::header_from_bytes(bytes, file_size).unwrap_err();
    assert!(!err.to_string().is_empty());
}
