//! Checksums: a candidate whose checksum fails is not a mention. This is most
//! of the extractors' false-positive care for IBANs, crypto addresses and
//! onion services (SPEC C4).

use sha3::{Digest, Keccak256, Sha3_256};

/// Length of an IBAN per country (ISO 13616 registry). A country not listed
/// is not accepted.
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];

/// True when `iban` (upper-case, no spaces) has its country's length and its
/// ISO 7064 MOD 97-10 check digits hold.
pub fn iban_is_valid(iban: &str) -> bool {
    let bytes = iban.as_bytes();
    if bytes.len() < 15 || !bytes.iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()) {
        return false;
    }
    let Some(&(_, len)) = IBAN_LENGTHS.iter().find(|(c, _)| c.as_bytes() == &bytes[..2]) else {
        return false;
    };
    if bytes.len() != len || !bytes[2].is_ascii_digit() || !bytes[3].is_ascii_digit() {
        return false;
    }
    // The country and check digits move to the end; letters count 10–35.
    let mut rem: u32 = 0;
    for &b in bytes[4..].iter().chain(&bytes[..4]) {
        if b.is_ascii_digit() {
            rem = (rem * 10 + u32::from(b - b'0')) % 97;
        } else {
            rem = (rem * 100 + u32::from(b - b'A') + 10) % 97;
        }
    }
    rem == 1
}

/// True when `addr` is a mainnet Bitcoin address whose checksum holds: P2PKH
/// (`1…`) or P2SH (`3…`) in base58check, or a segwit address (`bc1…`) in
/// bech32 (version 0) or bech32m (later versions).
pub fn btc_address_is_valid(addr: &str) -> bool {
    if addr.len() >= 4 && addr[..3].eq_ignore_ascii_case("bc1") {
        return match bech32::segwit::decode(addr) {
            Ok((hrp, _, _)) => hrp == bech32::hrp::BC,
            Err(_) => false,
        };
    }
    match bs58::decode(addr).with_check(None).into_vec() {
        Ok(payload) => payload.len() == 21 && (payload[0] == 0x00 || payload[0] == 0x05),
        Err(_) => false,
    }
}

/// True when `addr` is `0x` and 40 hex digits, and, written in mixed case,
/// its EIP-55 checksum holds (a letter is upper-case exactly where the
/// Keccak-256 of the lower-case address has a nibble ≥ 8).
pub fn eth_address_is_valid(addr: &str) -> bool {
    let Some(hex) = addr.strip_prefix("0x") else {
        return false;
    };
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let has_lower = hex.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = hex.bytes().any(|b| b.is_ascii_uppercase());
    if !(has_lower && has_upper) {
        return true;
    }
    let hash = Keccak256::digest(hex.to_ascii_lowercase().as_bytes());
    hex.bytes().enumerate().all(|(i, b)| {
        let nibble = (hash[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 0x0f;
        !b.is_ascii_alphabetic() || (b.is_ascii_uppercase() == (nibble >= 8))
    })
}

/// The EIP-55 spelling of a valid Ethereum address (its checksum case):
/// the one form whatever case it was written in, and the one a wallet
/// shows. `None` when `addr` is not valid ([`eth_address_is_valid`]).
pub fn eth_checksummed(addr: &str) -> Option<String> {
    if !eth_address_is_valid(addr) {
        return None;
    }
    let lower = addr[2..].to_ascii_lowercase();
    let hash = Keccak256::digest(lower.as_bytes());
    let mut out = String::with_capacity(42);
    out.push_str("0x");
    for (i, c) in lower.chars().enumerate() {
        let nibble = (hash[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 0x0f;
        out.push(if c.is_ascii_alphabetic() && nibble >= 8 { c.to_ascii_uppercase() } else { c });
    }
    Some(out)
}

/// True when `label` (the 56 characters before `.onion`, any case) is a v3
/// onion service address: base32 of a 32-byte key, a 2-byte checksum and
/// version 3, the checksum being the first bytes of
/// SHA3-256(".onion checksum" ‖ key ‖ version) (rend-spec-v3).
pub fn onion_is_valid(label: &str) -> bool {
    if label.len() != 56 {
        return false;
    }
    let Ok(bytes) = data_encoding::BASE32_NOPAD.decode(label.to_ascii_uppercase().as_bytes()) else {
        return false;
    };
    if bytes.len() != 35 || bytes[34] != 3 {
        return false;
    }
    let mut h = Sha3_256::new();
    h.update(b".onion checksum");
    h.update(&bytes[..32]);
    h.update([3u8]);
    let sum = h.finalize();
    sum[..2] == bytes[32..34]
}
