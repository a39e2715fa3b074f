//! People and organisations (SPEC A2), found the way an analyst reads a
//! page, by rules that can be named: a company's legal form after (or, for
//! French ones, before) its name in capitals (« Transports Lemaître et Fils
//! SARL », « Acme, Inc. », « la SCI Les Tilleuls »); a word that announces a
//! company (« la société Fleuve Logistique », « Banque Rhône-Alpes »); an
//! honorific before a name (« Mme Kowalczyk », « Dr. Jane Smith »); a known
//! given name before a surname (« Hélène Marchetti », « Marc D. »); the
//! display name of an address in an e-mail's header (« From: Paul Durand
//! <paul@…> »). Each mention names the rule that found it and a confidence
//! (per cent), which the store keeps with the relation. No statistics, no
//! model: the same text gives the same mentions.
//!
//! Names are kept as written (spaces collapsed, the typographic apostrophe
//! made plain); variants of one name (case, accents, initials) are distinct
//! entities an analyst merges.

use std::collections::{BTreeSet, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::{Found, Kind};

/// Legal forms and the jurisdictions that use them (at least twenty
/// countries). Longest first where one is the start of another.
const LEGAL_FORMS: &[(&str, &str)] = &[
    ("GmbH & Co. KG", "DE"),
    ("SE & Co. KGaA", "DE"),
    ("Sp. z o.o.", "PL"),
    ("S.à r.l.", "LU"),
    ("S.à.r.l.", "LU"),
    ("S.A.R.L.", "FR"),
    ("S.A.S.U.", "FR"),
    ("S.A.S.", "FR"),
    ("S.p.A.", "IT"),
    ("S.r.l.", "IT"),
    ("s.r.o.", "CZ, SK"),
    ("d.o.o.", "SI, HR, RS"),
    ("L.L.C.", "US"),
    ("S.A.", "FR, BE, LU, CH, ES"),
    ("S.L.", "ES"),
    ("B.V.", "NL"),
    ("N.V.", "NL, BE"),
    ("e.V.", "DE"),
    ("a.s.", "CZ"),
    ("Inc.", "US"),
    ("Corp.", "US"),
    ("Ltd.", "UK, CY, IE"),
    ("Kft.", "HU"),
    ("Zrt.", "HU"),
    ("Co.", "US, UK"),
    ("Incorporated", "US"),
    ("Corporation", "US"),
    ("Limited", "UK, CY, IE"),
    ("GmbH", "DE, AT, CH"),
    ("KGaA", "DE"),
    ("SASU", "FR"),
    ("SARL", "FR, LU, BE"),
    ("EURL", "FR"),
    ("SCOP", "FR"),
    ("SPRL", "BE"),
    ("BVBA", "BE"),
    ("ASBL", "BE"),
    ("SCSp", "LU"),
    ("SICAV", "LU, FR"),
    ("Sàrl", "CH"),
    ("SAS", "FR"),
    ("SCI", "FR"),
    ("SNC", "FR"),
    ("SCA", "FR"),
    ("GIE", "FR"),
    ("SRL", "BE, RO, IT"),
    ("VZW", "BE"),
    ("SCS", "LU"),
    ("OHG", "DE"),
    ("PLC", "UK"),
    ("plc", "UK"),
    ("LLP", "UK, US"),
    ("LLC", "US"),
    ("Inc", "US"),
    ("Ltd", "UK, CY, IE"),
    ("SIA", "LV"),
    ("UAB", "LT"),
    ("Oyj", "FI"),
    ("ApS", "DK"),
    ("A/S", "DK"),
    ("Lda", "PT"),
    ("SpA", "IT"),
    ("DAC", "IE"),
    ("OÜ", "EE"),
    ("AS", "EE, NO"),
    ("AB", "SE"),
    ("Oy", "FI"),
    ("AG", "DE, AT, CH"),
    ("KG", "DE"),
    ("UG", "DE"),
    ("BV", "NL"),
    ("NV", "NL, BE"),
    ("SA", "FR, BE, LU, CH"),
    ("SE", "EU"),
];

/// French legal forms also written before the name (« la SCI Les Tilleuls »).
const LEADING_FORMS: &[&str] = &["SARL", "SAS", "SASU", "SCI", "EURL", "SNC", "SCOP", "GIE"];

/// Words that announce a company when written in lower case before its name
/// (« la société Fleuve Logistique »), and that are the start of its name
/// when capitalised (« Banque Rhône-Alpes »).
const ORG_WORDS: &[&str] = &[
    "société",
    "entreprise",
    "holding",
    "compagnie",
    "groupe",
    "filiale",
    "firme",
    "association",
    "fondation",
    "cabinet",
    "banque",
    "company",
    "firm",
    "bank",
    "group",
    "subsidiary",
    "foundation",
    "gesellschaft",
    "firma",
];

/// Words that end a company's name in English or German (« Harbor Trust
/// Bank », « Coquelicot Services »): a capitalised run of two words or more
/// ending with one is a company's name.
const TRAILING_HEADS: &[&str] = &[
    "Bank",
    "Bancorp",
    "Group",
    "Holding",
    "Holdings",
    "Partners",
    "Services",
    "Trust",
    "Capital",
    "Ventures",
    "Logistics",
    "Logistik",
    "Consulting",
    "Associates",
    "Foundation",
    "Institute",
    "University",
    "Agency",
    "Company",
    "Airlines",
    "Industries",
    "Solutions",
    "Systems",
    "Technologies",
    "Shipping",
    "Freight",
    "Insurance",
    "Securities",
    "Investments",
    "Finance",
    "Fund",
    "Nominees",
    "Trading",
    "Enterprises",
];

/// Capitalised words that begin a company's or a body's name in French
/// (« Atelier Baudry », « Cabinet Roux »), besides the announcing words.
const LEADING_HEADS: &[&str] = &[
    "Atelier",
    "Agence",
    "Institut",
    "Université",
    "Caisse",
    "Crédit",
    "Mutuelle",
    "Laboratoire",
    "Laboratoires",
    "Clinique",
    "Studio",
    "Bureau",
    "Établissements",
    "Ets",
    "Garage",
    "Imprimerie",
    "Pharmacie",
];

/// Honorifics and titles before a person's name.
const HONORIFICS: &[&str] = &[
    "M.",
    "MM.",
    "Mme",
    "Mmes",
    "Mlle",
    "Me",
    "Dr",
    "Dr.",
    "Pr",
    "Pr.",
    "Monsieur",
    "Madame",
    "Mademoiselle",
    "Maître",
    "Docteur",
    "Professeur",
    "Mr",
    "Mr.",
    "Mrs",
    "Mrs.",
    "Ms",
    "Ms.",
    "Miss",
    "Sir",
    "Dame",
    "Herr",
    "Frau",
    "Prof.",
    "Prof",
];

/// Ranks and offices before a person's name, in lower case or capitalised
/// (« le commandant Fabre », « Judge Ruth Baker »).
const TITLES: &[&str] = &[
    "commandant",
    "capitaine",
    "lieutenant",
    "colonel",
    "général",
    "juge",
    "procureur",
    "commissaire",
    "inspecteur",
    "inspectrice",
    "adjudant",
    "brigadier",
    "président",
    "présidente",
    "directeur",
    "directrice",
    "sénateur",
    "député",
    "ministre",
    "captain",
    "inspector",
    "detective",
    "judge",
    "officer",
    "sergeant",
    "senator",
    "president",
    "minister",
    "governor",
];

/// Lower-case words inside a name (« Transports Lemaître et Fils », « Bank
/// of America », « Charles de Gaulle »).
const CONNECTORS: &[&str] = &[
    "de", "des", "du", "d'", "et", "&", "and", "of", "the", "la", "le", "les", "l'", "van", "von", "der", "den", "di",
    "da", "del", "y", "e", "ben", "bin", "el", "al",
];

/// Particles inside a person's name (« Charles de Gaulle », « Ludwig van
/// Beethoven »): no « et », no « and ».
const PARTICLES: &[&str] = &[
    "de", "du", "des", "d'", "van", "von", "der", "den", "di", "da", "del", "le", "la", "ben", "bin", "el", "al", "ibn",
];

/// Capitalised words that begin sentences, not names: a name never takes
/// them in.
const NOT_NAMES: &[&str] = &[
    "Selon",
    "Pour",
    "Par",
    "Avec",
    "Dans",
    "Chez",
    "Depuis",
    "Entre",
    "Contre",
    "Sur",
    "Sous",
    "Vers",
    "Après",
    "Avant",
    "Le",
    "La",
    "Les",
    "Un",
    "Une",
    "Des",
    "Du",
    "De",
    "Au",
    "Aux",
    "Ce",
    "Cet",
    "Cette",
    "Ces",
    "Son",
    "Sa",
    "Ses",
    "Leur",
    "Leurs",
    "Notre",
    "Nos",
    "Votre",
    "Vos",
    "Mon",
    "Ma",
    "Mes",
    "Il",
    "Elle",
    "Ils",
    "Elles",
    "On",
    "Nous",
    "Vous",
    "Je",
    "Et",
    "Mais",
    "Ou",
    "Donc",
    "Or",
    "Ni",
    "Car",
    "Si",
    "Quand",
    "Lorsque",
    "Puis",
    "Enfin",
    "Ainsi",
    "Alors",
    "Aussi",
    "Cependant",
    "Toutefois",
    "Objet",
    "Réf",
    "Annexe",
    "The",
    "A",
    "An",
    "According",
    "For",
    "By",
    "With",
    "In",
    "At",
    "On",
    "From",
    "To",
    "Of",
    "And",
    "But",
    "Since",
    "After",
    "Before",
    "During",
    "This",
    "That",
    "These",
    "Those",
    "His",
    "Her",
    "Their",
    "Its",
    "Our",
    "Your",
    "My",
    "We",
    "You",
    "He",
    "She",
    "They",
    "It",
    "If",
    "When",
    "Then",
    "Dear",
    "Cher",
    "Chère",
    "Bonjour",
    "Hello",
    "Hi",
    "Subject",
    "Re",
    "Fwd",
    "Tr",
    "Lundi",
    "Mardi",
    "Mercredi",
    "Jeudi",
    "Vendredi",
    "Samedi",
    "Dimanche",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Janvier",
    "Février",
    "Mars",
    "Avril",
    "Mai",
    "Juin",
    "Juillet",
    "Août",
    "Septembre",
    "Octobre",
    "Novembre",
    "Décembre",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Merci",
    "Cordialement",
    "Regards",
    "Thanks",
    "Thank",
];

/// Given names the person rule knows (`data/first-names.txt`).
static FIRST_NAMES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../data/first-names.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

#[allow(clippy::expect_used)] // the patterns are constants, checked by every test
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("name pattern compiles")
}

/// Any legal form, as a whole word.
static LEGAL: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives: Vec<String> = LEGAL_FORMS.iter().map(|(f, _)| regex::escape(f)).collect();
    re(&format!("(?:{})", alternatives.join("|")))
});
/// An e-mail header line with addresses.
static HEADER: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?im)^(?:from|to|cc|bcc|reply-to|de|à|a|répondre à|envoyé par)[ \t]*:[ \t]*([^\n]+)$"));
/// A display name and its address.
static DISPLAY: LazyLock<Regex> = LazyLock::new(|| re(r#""?([^"<>,;:@\n]{2,80}?)"?[ \t]*<[^<>@\s]+@[^<>\s]+>"#));

/// A word of a name: its byte span in the text.
#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
}

/// Words of `text` (letters, digits, and `'`, `’`, `-`, `.` inside a word,
/// a final `.` after one letter: « J. », « D. »), with the separator that
/// follows each.
fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !c.is_alphanumeric() && c != '&' {
            continue;
        }
        let start = i;
        let mut end = i + c.len_utf8();
        if c == '&' {
            out.push(Word { start, end });
            continue;
        }
        while let Some(&(j, d)) = chars.peek() {
            if d.is_alphanumeric() {
                end = j + d.len_utf8();
                chars.next();
                continue;
            }
            if matches!(d, '\'' | '’' | '-' | '.' | '/') {
                // Inside a word only: a letter or digit must follow.
                let after = text[j + d.len_utf8()..].chars().next();
                if after.is_some_and(char::is_alphanumeric) {
                    end = j + d.len_utf8();
                    chars.next();
                    continue;
                }
                // An initial's dot (« J. »).
                if d == '.' && text[start..end].chars().count() == 1 {
                    end = j + 1;
                    chars.next();
                }
            }
            break;
        }
        out.push(Word { start, end });
    }
    out
}

/// A word of a name: it starts with a capital (« Lemaître », « OÜ »), or
/// with a digit and holds a letter (« 3M »); a number (« 1. ») is not one.
fn is_capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_uppercase() || (c.is_ascii_digit() && w.chars().any(char::is_alphabetic)))
}

fn is_connector(w: &str) -> bool {
    CONNECTORS.contains(&w) || w.ends_with('\'') || w.ends_with('’')
}

/// Whether only spaces (and at most one comma, when `comma`) lie between
/// two words: a name does not run across a line, a full stop or a bracket.
fn joined(text: &str, from: usize, to: usize, comma: bool) -> bool {
    let gap = &text[from..to];
    gap.chars().all(|c| c == ' ' || c == '\u{a0}' || (comma && c == ','))
        && gap.chars().filter(|c| *c == ',').count() <= 1
        && !gap.is_empty()
}

/// The name as stored: spaces collapsed, `’` made `'`.
fn normal(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace('’', "'")
}

fn push(
    out: &mut BTreeSet<Found>,
    text: &str,
    start: usize,
    end: usize,
    kind: Kind,
    rule: &'static str,
    confidence: u8,
) {
    let value = normal(&text[start..end]);
    if value.chars().count() < 2 || value.chars().count() > 200 || value.chars().any(char::is_control) {
        return;
    }
    out.insert(Found { start, end, kind, value, recogniser: rule, confidence });
}

/// The capitalised run of words ending at `words[last]` (walking back):
/// capitalised words and connectors inside, at most `max` words, never a
/// sentence word; the index of its first word, if it has one capitalised.
fn run_back(text: &str, ws: &[Word], last: usize, max: usize) -> Option<usize> {
    let mut first = None;
    let mut i = last;
    loop {
        let w = &text[ws[i].start..ws[i].end];
        // Another legal form ends the name before (« Baltic Nominees SIA
        // and Vilnius Trade UAB » is two companies).
        let ok = if is_capitalised(w) { !NOT_NAMES.contains(&w) && !is_legal_form(w) } else { is_connector(w) };
        if !ok || last - i >= max {
            break;
        }
        if !is_capitalised(w) && i > 0 {
            let before = &text[ws[i - 1].start..ws[i - 1].end];
            // Two names joined (« Banque Rhône-Alpes et de Harbor Trust
            // Bank »): a name holds no « et de », « and of ».
            if matches!(w, "de" | "des" | "du" | "of" | "the") && matches!(before, "et" | "and" | "&") {
                break;
            }
            // A person and their company (« Rebecca Stone of Stone Risk
            // Advisory Limited »).
            if matches!(w, "of" | "de" | "chez" | "at")
                && i > 1
                && is_given_name(&text[ws[i - 2].start..ws[i - 2].end])
                && is_capitalised(before)
            {
                break;
            }
        }
        if is_capitalised(w) {
            first = Some(i);
        }
        if i == 0 || !joined(text, ws[i - 1].end, ws[i].start, false) {
            break;
        }
        i -= 1;
    }
    first
}

/// What a forward run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// A company's name: connectors inside (« et », « of »).
    Company,
    /// A company's name after a leading legal form: it may start with an
    /// article (« la SCI Les Tilleuls »).
    AfterForm,
    /// A person's name: particles inside (« de », « van »).
    Person,
}

/// The capitalised run of words starting at `words[from]`: its last word's
/// index, at most `max` words, connectors inside only.
fn run_forward(text: &str, ws: &[Word], from: usize, max: usize, how: Run) -> Option<usize> {
    let mut last = None;
    let mut i = from;
    while i < ws.len() && i - from < max {
        let w = &text[ws[i].start..ws[i].end];
        let article = how == Run::AfterForm && i == from && matches!(w, "Le" | "La" | "Les" | "L'" | "L’");
        let ok = if is_capitalised(w) {
            article || (!NOT_NAMES.contains(&w) && !is_legal_form(w))
        } else if how == Run::Person {
            PARTICLES.contains(&w)
        } else {
            is_connector(w)
        };
        if !ok {
            break;
        }
        // « Banque Rhône-Alpes et de Harbor Trust Bank » is two names.
        if matches!(w, "et" | "and" | "&")
            && ws.get(i + 1).is_some_and(|n| matches!(&text[n.start..n.end], "de" | "des" | "du" | "of" | "the"))
        {
            break;
        }
        if is_capitalised(w) {
            last = Some(i);
        }
        if i + 1 >= ws.len() || !joined(text, ws[i].end, ws[i + 1].start, false) {
            break;
        }
        i += 1;
    }
    last
}

/// Whether `w` is a legal form the organisation rule knows (`SARL`,
/// `GmbH`, `Inc.`…), as written.
pub fn is_legal_form(w: &str) -> bool {
    LEGAL_FORMS.iter().any(|(f, _)| *f == w)
}

/// Organisations by their legal form, after the name or before it.
pub(crate) fn organisations(text: &str, out: &mut BTreeSet<Found>) {
    let ws = words(text);
    for m in LEGAL.find_iter(text) {
        // A whole word: nothing glued before or after.
        let before = text[..m.start()].chars().next_back();
        let after = text[m.end()..].chars().next();
        // A dot after a form that has none of its own ends the sentence
        // (« … Data OÜ. »), unless a letter follows it (« S.A » of « S.A.S »).
        let glued_dot = after == Some('.')
            && !m.as_str().ends_with('.')
            && text[m.end() + 1..].chars().next().is_some_and(char::is_alphanumeric);
        if before.is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '-')
            || after.is_some_and(|c| c.is_alphanumeric() || c == '-')
            || glued_dot
        {
            continue;
        }
        // The name before it: the words ending just before (« Acme, Inc. »
        // has a comma between). Words are in text order: a binary search,
        // so a text full of legal forms stays linear in its length.
        let prev = ws.partition_point(|w| w.end <= m.start()).checked_sub(1);
        if let Some(last) = prev.filter(|&i| joined(text, ws[i].end, m.start(), true)) {
            if let Some(first) = run_back(text, &ws, last, 6) {
                push(out, text, ws[first].start, m.end(), Kind::Organisation, "organisation/legal_form", 90);
                continue;
            }
        }
        // A French form before the name (« la SCI Les Tilleuls »).
        if LEADING_FORMS.contains(&m.as_str()) {
            let next = Some(ws.partition_point(|w| w.start < m.end())).filter(|&i| i < ws.len());
            if let Some(first) = next.filter(|&i| joined(text, m.end(), ws[i].start, false)) {
                if let Some(last) = run_forward(text, &ws, first, 6, Run::AfterForm) {
                    push(out, text, m.start(), ws[last].end, Kind::Organisation, "organisation/legal_form", 85);
                }
            }
        }
    }
    // A word that announces a company.
    for (i, w) in ws.iter().enumerate() {
        let word = &text[w.start..w.end];
        let lower = word.to_lowercase();
        if !ORG_WORDS.contains(&lower.as_str()) || i + 1 >= ws.len() || !joined(text, w.end, ws[i + 1].start, false) {
            continue;
        }
        let Some(last) = run_forward(text, &ws, i + 1, 5, Run::Company) else { continue };
        let start = if is_capitalised(word) { w.start } else { ws[i + 1].start };
        push(out, text, start, ws[last].end, Kind::Organisation, "organisation/announced", 70);
    }
}

/// Organisations by the word that ends (« Harbor Trust Bank ») or begins
/// (« Atelier Baudry ») their name.
pub(crate) fn headed(text: &str, out: &mut BTreeSet<Found>) {
    let ws = words(text);
    for (i, w) in ws.iter().enumerate() {
        let word = &text[w.start..w.end];
        if TRAILING_HEADS.contains(&word) && i > 0 && joined(text, ws[i - 1].end, w.start, false) {
            let Some(first) = run_back(text, &ws, i - 1, 5) else { continue };
            if ws[first..i].iter().any(|x| is_capitalised(&text[x.start..x.end])) {
                push(out, text, ws[first].start, w.end, Kind::Organisation, "organisation/head_word", 75);
            }
        }
        if LEADING_HEADS.contains(&word) && i + 1 < ws.len() && joined(text, w.end, ws[i + 1].start, false) {
            if let Some(last) = run_forward(text, &ws, i + 1, 4, Run::Company) {
                push(out, text, w.start, ws[last].end, Kind::Organisation, "organisation/head_word", 75);
            }
        }
    }
}

/// Greetings before a given name alone (« Bonjour Marc, », « Hi Thomas, »).
const GREETINGS: &[&str] = &["Bonjour", "Bonsoir", "Salut", "Cher", "Chère", "Hello", "Hi", "Dear"];

/// People by an honorific, a known given name, or an e-mail display name.
pub(crate) fn people(text: &str, out: &mut BTreeSet<Found>) {
    let ws = words(text);
    for (i, w) in ws.iter().enumerate() {
        let word = &text[w.start..w.end];
        // « M. », « Dr. »: the word and its dot.
        let with_dot = if text[w.end..].starts_with('.') { &text[w.start..w.end + 1] } else { word };
        let title = TITLES.contains(&word.to_lowercase().as_str());
        if (HONORIFICS.contains(&with_dot) || HONORIFICS.contains(&word) || title)
            && i + 1 < ws.len()
            && joined(text, w.end + (with_dot.len() - word.len()), ws[i + 1].start, false)
        {
            if let Some(last) = run_forward(text, &ws, i + 1, 3, Run::Person) {
                if !followed_by_form(text, ws[last].end) {
                    let rule = if title { "person/title" } else { "person/honorific" };
                    push(out, text, ws[i + 1].start, ws[last].end, Kind::Person, rule, if title { 75 } else { 80 });
                    continue;
                }
            }
        }
        if GREETINGS.contains(&word) && i + 1 < ws.len() && joined(text, w.end, ws[i + 1].start, false) {
            let next = &text[ws[i + 1].start..ws[i + 1].end];
            let alone = i + 2 >= ws.len() || !joined(text, ws[i + 1].end, ws[i + 2].start, false);
            if is_given_name(next) && alone {
                push(out, text, ws[i + 1].start, ws[i + 1].end, Kind::Person, "person/greeting", 70);
            }
        }
        if !is_given_name(word) || i + 1 >= ws.len() || !joined(text, w.end, ws[i + 1].start, false) {
            continue;
        }
        // The word before must not be part of a capitalised run (« Banque
        // Marie Curie »), unless it is a sentence word or an honorific.
        if i > 0 && joined(text, ws[i - 1].end, w.start, false) {
            let prev = &text[ws[i - 1].start..ws[i - 1].end];
            if is_capitalised(prev)
                && !NOT_NAMES.contains(&prev)
                && !HONORIFICS.iter().any(|h| h.trim_end_matches('.') == prev)
            {
                continue;
            }
        }
        let Some(last) = run_forward(text, &ws, i + 1, 2, Run::Person) else { continue };
        if followed_by_form(text, ws[last].end) {
            continue;
        }
        let initial_only = last == i + 1 && text[ws[last].start..ws[last].end].ends_with('.');
        let confidence = if initial_only { 50 } else { 85 };
        push(out, text, w.start, ws[last].end, Kind::Person, "person/given_name", confidence);
    }
    for line in HEADER.captures_iter(text) {
        let Some(value) = line.get(1) else { continue };
        for d in DISPLAY.captures_iter(value.as_str()) {
            let Some(name) = d.get(1) else { continue };
            let raw = name.as_str().trim();
            let offset = value.start() + name.start() + (name.as_str().len() - name.as_str().trim_start().len());
            let parts: Vec<&str> = raw.split_whitespace().collect();
            if !(2..=4).contains(&parts.len()) || raw.chars().any(|c| c.is_ascii_digit()) {
                continue;
            }
            if parts.iter().any(|p| is_legal_form(p)) {
                push(out, text, offset, offset + raw.len(), Kind::Organisation, "organisation/display_name", 90);
            } else if parts.iter().all(|p| is_capitalised(p) || is_connector(p)) {
                push(out, text, offset, offset + raw.len(), Kind::Person, "person/display_name", 90);
            }
        }
    }
}

/// Whether a legal form follows `at` (then the name is a company's).
fn followed_by_form(text: &str, at: usize) -> bool {
    let rest = text[at..].trim_start_matches([' ', ',']);
    LEGAL
        .find(rest)
        .is_some_and(|m| m.start() == 0 && rest[m.end()..].chars().next().is_none_or(|c| !c.is_alphanumeric()))
}

/// A known given name, or a compound of them (« Jean-Pierre »).
fn is_given_name(w: &str) -> bool {
    let known = |p: &str| {
        FIRST_NAMES.contains(p)
            || (p.chars().count() > 1
                && p.chars().all(|c| !c.is_lowercase())
                && FIRST_NAMES.contains(title_case(p).as_str()))
    };
    known(w) || (w.contains('-') && w.split('-').all(known))
}

/// « JAMES » → « James ».
fn title_case(w: &str) -> String {
    let mut cs = w.chars();
    cs.next().map(|c| c.to_uppercase().chain(cs.flat_map(char::to_lowercase)).collect()).unwrap_or_default()
}

/// Drops a person or organisation found inside a longer one (« Jean
/// Dupont » in « Jean Dupont SARL »), and of two mentions on one span
/// keeps the more confident. One sort and one pass: a text of millions of
/// names stays `n log n`.
pub(crate) fn settle(out: &mut BTreeSet<Found>) {
    let mut names: Vec<Found> =
        out.iter().filter(|f| matches!(f.kind, Kind::Person | Kind::Organisation)).cloned().collect();
    // By start; on one start the longest first; on one span the most
    // confident first. Every span seen before `f` starts at or before it,
    // so `f` lies inside one of them exactly when one reaches its end.
    names.sort_by(|a, b| {
        a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then((b.confidence, b.kind).cmp(&(a.confidence, a.kind)))
    });
    let mut reach = 0usize;
    for f in names {
        if f.end <= reach {
            out.remove(&f);
        }
        reach = reach.max(f.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(Kind, String, &'static str)> {
        let mut out = BTreeSet::new();
        organisations(text, &mut out);
        people(text, &mut out);
        settle(&mut out);
        out.into_iter().map(|f| (f.kind, f.value, f.recogniser)).collect()
    }

    #[test]
    fn companies_by_their_legal_form_in_many_jurisdictions() {
        let f = found(
            "La société Transports Lemaître et Fils SARL, la holding Oberkampf Participations SA, Acme, Inc. \
             et Müller GmbH & Co. KG ; la SCI Les Tilleuls ; Tallinn Data OÜ.",
        );
        let orgs: Vec<&str> = f.iter().filter(|x| x.0 == Kind::Organisation).map(|x| x.1.as_str()).collect();
        assert!(orgs.contains(&"Transports Lemaître et Fils SARL"), "{f:?}");
        assert!(orgs.contains(&"Oberkampf Participations SA"), "{f:?}");
        assert!(orgs.contains(&"Acme, Inc."), "{f:?}");
        assert!(orgs.contains(&"Müller GmbH & Co. KG"), "{f:?}");
        assert!(orgs.contains(&"SCI Les Tilleuls"), "{f:?}");
        assert!(orgs.contains(&"Tallinn Data OÜ"), "{f:?}");
        let countries: HashSet<&str> = LEGAL_FORMS.iter().flat_map(|(_, c)| c.split(", ")).collect();
        assert!(countries.len() >= 20, "{countries:?}");
    }

    #[test]
    fn people_by_honorific_given_name_and_display_name() {
        let f = found(
            "Rédigée par Hélène Marchetti. Mme Kowalczyk et M. Benali ; Marc D. signe.\n\
             From: Paul Durand <paul@durand.example>\nTo: \"Ana Ruiz\" <ana@x.example>",
        );
        let people: Vec<(&str, &str)> = f.iter().filter(|x| x.0 == Kind::Person).map(|x| (x.1.as_str(), x.2)).collect();
        for want in ["Hélène Marchetti", "Kowalczyk", "Benali", "Marc D.", "Paul Durand", "Ana Ruiz"] {
            assert!(people.iter().any(|(n, _)| *n == want), "{want}: {people:?}");
        }
        assert!(people.contains(&("Paul Durand", "person/display_name")), "{people:?}");
    }

    #[test]
    fn sentence_words_and_companies_are_not_people() {
        let f = found("Selon Acme SA, rien. Pierre Martin SARL est une société. La Banque Marie Curie.");
        assert!(f.iter().any(|x| x.1 == "Acme SA"), "{f:?}");
        assert!(!f.iter().any(|x| x.1.starts_with("Selon")), "{f:?}");
        assert!(f.iter().any(|x| x.1 == "Pierre Martin SARL" && x.0 == Kind::Organisation), "{f:?}");
        assert!(!f.iter().any(|x| x.0 == Kind::Person), "{f:?}");
    }
}
