//! The extractors on hand-picked texts: what each finds, how it normalises,
//! and the false positives it must not produce (SPEC C4).

use super::*;

fn values(text: &str, kind: Kind) -> Vec<String> {
    extract(text).mentions.into_iter().filter(|m| m.kind == kind).map(|m| m.value).collect()
}

fn kinds(text: &str) -> Vec<(Kind, String)> {
    extract(text).mentions.into_iter().map(|m| (m.kind, m.value)).collect()
}

#[test]
fn domains_are_normalised_to_their_ascii_lower_case_form() {
    assert_eq!(values("Voir Exemple.COM. et café.fr", Kind::Domain), ["exemple.com", "xn--caf-dma.fr"]);
    assert_eq!(values("hôte: www.gouv.fr.", Kind::Domain), ["www.gouv.fr"]);
    assert_eq!(values("sous bbc.co.uk et co.uk seul", Kind::Domain), ["bbc.co.uk"]);
    // Special-use names (RFC 6761) are hosts in synthetic and lab documents.
    assert_eq!(values("nordlys.example et api.lab.test", Kind::Domain), ["nordlys.example", "api.lab.test"]);
    // What the IDNA mapping turns into no host name is none (`⑽` → `(10)`;
    // the fuzzer's find), nor is the mention's address.
    assert_eq!(values("voir ⑽.fr", Kind::Domain), Vec::<String>::new());
    assert_eq!(values("voir ⑧.com", Kind::Domain), ["8.com"]); // a host name once mapped
    assert_eq!(values("écrire à a@⑽.fr", Kind::Email), Vec::<String>::new());
}

#[test]
fn file_names_versions_and_prose_are_not_domains() {
    for text in [
        "rapport.pdf, index.html, setup.exe, install.sh, main.py, README.md, archive.zip",
        "version 1.2.3, v2.0, e.g. this, i.e. that, node.js, config.json",
        "hosts.allow et fichier.inconnu",
        "192.168.1.1",
    ] {
        assert_eq!(values(text, Kind::Domain), Vec::<String>::new(), "{text}");
    }
}

#[test]
fn an_address_local_part_is_not_a_domain_but_its_domain_is() {
    assert_eq!(
        kinds("écrire à Jean.Dupont@Exemple.fr."),
        [(Kind::Email, "jean.dupont@exemple.fr".to_owned()), (Kind::Domain, "exemple.fr".to_owned())]
    );
    assert_eq!(values("a..b@exemple.fr .a@exemple.fr", Kind::Email), Vec::<String>::new());
}

#[test]
fn urls_lose_the_sentence_around_them_and_their_fragment() {
    assert_eq!(
        values("(voir https://Exemple.com/page?q=1#haut). Puis http://café.fr/a_(b)", Kind::Url),
        ["https://exemple.com/page?q=1", "http://xn--caf-dma.fr/a_(b)"]
    );
    assert_eq!(values("javascript:alert(1) file:///etc/passwd data:text/html,x", Kind::Url), Vec::<String>::new());
}

#[test]
fn a_url_followed_by_many_closing_brackets_is_trimmed_in_linear_time() {
    // Found by the `extract` fuzz target (tests/fuzz, a libFuzzer timeout):
    // the brackets were counted again for each one trimmed, so 64 KiB of
    // `)` after a URL took seconds, and a page of them would take hours.
    // Quadratic, this input takes hours (the test run's timeout says so);
    // linear, milliseconds. No timing is asserted here.
    let text = format!("voir http://exemple.fr/a_(b){}", ")".repeat(200_000));
    assert_eq!(values(&text, Kind::Url), ["http://exemple.fr/a_(b)"]);
    // The counts follow what is trimmed, brackets and parentheses apart.
    assert_eq!(values("(http://exemple.fr/[x]]).", Kind::Url), ["http://exemple.fr/[x]"]);
    assert_eq!(values("http://exemple.fr/(a)[b]);]", Kind::Url), ["http://exemple.fr/(a)[b]"]);
}

#[test]
fn a_page_full_of_names_and_legal_forms_is_read_in_n_log_n() {
    // The name rules looked for the word before each legal form from the
    // text's start, and compared every name found with every other:
    // quadratic, a 3 MB page of « Mme Kowalczyk, Acme SA ; » takes hours
    // (the test run's timeout says so); now milliseconds. No timing is
    // asserted here.
    let text = "Mme Kowalczyk, Acme SA ; ".repeat(120_000);
    let ex = extract(&text);
    assert_eq!(ex.mentions.len() + ex.dropped, 240_000, "one person and one company each time");
    assert!(ex.mentions.iter().all(|m| (m.kind, m.value.as_str()) == (Kind::Person, "Kowalczyk")
        || (m.kind, m.value.as_str()) == (Kind::Organisation, "Acme SA")));
}

#[test]
fn ipv4_takes_dotted_quads_and_leaves_versions() {
    assert_eq!(values("serveur 203.0.113.7, passerelle 10.0.0.1.", Kind::Ipv4), ["203.0.113.7", "10.0.0.1"]);
    for text in ["version 1.2.3.4", "v1.2.3.4", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "build: 10.0.19.41"] {
        assert_eq!(values(text, Kind::Ipv4), Vec::<String>::new(), "{text}");
    }
}

#[test]
fn ipv6_in_its_compressed_form_but_not_times_macs_or_code() {
    assert_eq!(values("hôte 2001:DB8:0:0:0:0:0:1, puis fe80::1:", Kind::Ipv6), ["2001:db8::1", "fe80::1"]);
    for text in ["à 12:30:45", "mac 00:1a:2b:3c:4d:5e", "std::io::Read", "Vec::new", "::"] {
        assert_eq!(values(text, Kind::Ipv6), Vec::<String>::new(), "{text}");
    }
}

#[test]
fn phones_in_e164_form() {
    assert_eq!(
        values("tél. +33 (0)1 23 45 67 89, portable 06 12 34 56 78, US +1-202-555-0143", Kind::Phone),
        ["+33123456789", "+33612345678", "+12025550143"]
    );
    assert_eq!(values("réf 1234567 et +12 34", Kind::Phone), Vec::<String>::new());
}

#[test]
fn ibans_need_their_checksum_and_stop_at_the_last_group() {
    assert_eq!(
        values("IBAN FR76 3000 6000 0112 3456 7890 189 MERCI; DE89370400440532013000", Kind::Iban),
        ["FR7630006000011234567890189", "DE89370400440532013000"]
    );
    assert_eq!(values("FR76 3000 6000 0112 3456 7890 188", Kind::Iban), Vec::<String>::new());
    assert!(iban_is_valid("GB82WEST12345698765432"));
    assert!(!iban_is_valid("GB82WEST1234569876543"));
    assert!(!iban_is_valid("ZZ82WEST12345698765432"));
}

#[test]
fn bitcoin_addresses_need_their_checksum() {
    let text = "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa 3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy \
                BC1QAR0SRRR7XFKVY5L643LYDNW9RE59GTZZWF5MDQ \
                bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0 \
                1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdx";
    assert_eq!(
        values(text, Kind::BtcAddress),
        [
            "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa",
            "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
            "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
            "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0",
        ]
    );
}

#[test]
fn ethereum_addresses_check_eip55_when_mixed_case() {
    assert_eq!(
        values(
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed 0x52908400098527886e0f7030069857d2e4169ee7",
            Kind::EthAddress
        ),
        // Stored in their EIP-55 case (the walk: the case was lost), the
        // second computed from its lower-case spelling (EIP-55's own vector).
        ["0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x52908400098527886E0F7030069857D2E4169EE7"]
    );
    assert!(!eth_address_is_valid("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"));
    // The 40 hex digits after 0x are an address, not also a SHA-1.
    assert_eq!(values("0x52908400098527886e0f7030069857d2e4169ee7", Kind::FileHash), Vec::<String>::new());
}

#[test]
fn onion_addresses_need_their_v3_checksum() {
    let good = "duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczad";
    let bad = "duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczae";
    let text = format!("http://www.{}.onion/ et {bad}.onion", good.to_uppercase());
    assert_eq!(values(&text, Kind::Onion), [format!("{good}.onion")]);
    // An onion name is not a domain; its URL is a URL.
    assert_eq!(values(&text, Kind::Domain), Vec::<String>::new());
    assert_eq!(values(&text, Kind::Url), [format!("http://www.{good}.onion/")]);
}

#[test]
fn file_hashes_by_length() {
    let text = "md5 D41D8CD98F00B204E9800998ECF8427E sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709 \
                sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(
        values(text, Kind::FileHash),
        [
            "d41d8cd98f00b204e9800998ecf8427e",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ]
    );
    // 50 hex digits, all-digit runs and all-letter runs are not digests.
    let text = format!("{} {} {}", "a1".repeat(25), "1".repeat(32), "abcdef".repeat(6).get(..32).unwrap_or(""));
    assert_eq!(values(&text, Kind::FileHash), Vec::<String>::new());
}

#[test]
fn offsets_count_characters_and_point_at_the_text_as_written() {
    let text = "Élodie écrit à Elodie@Exemple.fr depuis 203.0.113.7 ; ÉLODIE@exemple.fr";
    let ex = extract(text);
    let chars: Vec<char> = text.chars().collect();
    let written: Vec<(Kind, String)> =
        ex.mentions.iter().map(|m| (m.kind, chars[m.start..m.start + m.len].iter().collect())).collect();
    // `ÉLODIE@…` glued to its accent is no address (not `LODIE@…`); its
    // domain still is one.
    assert_eq!(
        written,
        [
            (Kind::Email, "Elodie@Exemple.fr".to_owned()),
            (Kind::Domain, "Exemple.fr".to_owned()),
            (Kind::Ipv4, "203.0.113.7".to_owned()),
            (Kind::Domain, "exemple.fr".to_owned()),
        ]
    );
}

#[test]
fn the_same_text_gives_the_same_mentions_in_order() {
    let text = "x 10.0.0.1 y exemple.fr z 10.0.0.1 exemple.fr";
    let a = extract(text);
    assert_eq!(a, extract(text));
    let starts: Vec<usize> = a.mentions.iter().map(|m| m.start).collect();
    let mut sorted = starts.clone();
    sorted.sort_unstable();
    assert_eq!(starts, sorted);
    assert_eq!(a.mentions.len(), 4);
}

#[test]
fn mentions_are_bounded_and_the_rest_counted() {
    let text = (0..MAX_MENTIONS + 5).map(|i| format!("10.{}.{}.1 ", i / 256 % 256, i % 256)).collect::<String>();
    let ex = extract(&text);
    assert_eq!(ex.mentions.len(), MAX_MENTIONS);
    assert_eq!(ex.dropped, 5);
}

#[test]
fn kinds_round_trip_their_stored_spelling() {
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
    assert_eq!(Kind::parse("location"), None);
    assert!(!Kind::Person.is_selector() && !Kind::Organisation.is_selector() && Kind::Iban.is_selector());
}

/// SPEC A5: a query is read as the selector it is, in any written form.
#[test]
fn a_query_is_read_as_a_selector_in_any_written_form() {
    let sel = |q: &str| crate::selector(q).map(|s| (s.kind, s.value));
    let iban = Some((Kind::Iban, "FR7630006000011234567890189".to_owned()));
    assert_eq!(sel("FR76 3000 6000 0112 3456 7890 189"), iban);
    assert_eq!(sel("  FR7630006000011234567890189 "), iban);
    assert_eq!(sel("fr76 3000 6000 0112 3456 7890 189"), iban);
    let phone = Some((Kind::Phone, "+33612345678".to_owned()));
    assert_eq!(sel("06 12 34 56 78"), phone);
    assert_eq!(sel("0612345678"), phone);
    assert_eq!(sel("+33 6 12 34 56 78"), phone);
    assert_eq!(sel("Contact@Durand.Example"), Some((Kind::Email, "contact@durand.example".to_owned())));
    let www = crate::selector("www.durand.example").unwrap();
    assert_eq!(
        (www.kind, www.values),
        (Kind::Domain, vec!["www.durand.example".to_owned(), "durand.example".to_owned()])
    );
    let bare = crate::selector("durand.example").unwrap();
    assert_eq!(bare.values, ["durand.example", "www.durand.example"]);
    // Not a selector: a name, words around one, two of them, nothing.
    for q in ["Durand", "l'IBAN FR7630006000011234567890189", "a@b.example c@d.example", "", "   "] {
        assert_eq!(crate::selector(q), None, "{q:?}");
    }
    // A checksum that fails is no IBAN.
    assert_eq!(sel("FR7630006000011234567890188"), None);
}

/// The walk's extraction noise (issue 44, A4): a Markdown reference link's
/// `][2` is not part of its URL; a message's identifier is not an e-mail.
#[test]
fn markdown_reference_links_and_message_ids_are_not_selectors() {
    let text = "Site : [https://www.azur-transit.fr/][2] et [1]: https://www.azur-transit.fr/contact\n\
                Hôte [2001:db8::1] : http://[2001:db8::1]:8080/status\n";
    assert_eq!(
        values(text, Kind::Url),
        ["https://www.azur-transit.fr/", "https://www.azur-transit.fr/contact", "http://[2001:db8::1]:8080/status"]
    );
    let mail = "From: Anna Koehler <anna.koehler@koehler-holding.de>\n\
                Message-ID: <20260414071244.4821@koehler-holding.de>\n\
                In-Reply-To: <20260413.99@azur-transit.fr>\n\
                References: <20260413.99@azur-transit.fr> <a.b@azur-transit.fr>\n\
                message-id: <x.1@example.org>\n\
                Écrire à contact@azur-transit.fr pour le message-id: 12.";
    assert_eq!(values(mail, Kind::Email), ["anna.koehler@koehler-holding.de", "contact@azur-transit.fr"]);
}
