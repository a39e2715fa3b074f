//! What a text's structure states beyond its selectors (SPEC A4): in a
//! message, which address sent it and which received it, and whose display
//! name goes with each address.

use serde::Serialize;

use crate::{Kind, Mention};

/// The part an address plays in a message's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `From:` — the sender.
    From,
    /// `To:` — a recipient.
    To,
    /// `Cc:` — a recipient in copy.
    Cc,
}

/// An address a message's header names, in its role, with the person whose
/// display name goes with it (`Paul Durand <paul@durand.example>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Addressed {
    /// Its role.
    pub role: Role,
    /// The address, as extraction normalised it (an [`Kind::Email`] value).
    pub email: String,
    /// The person named beside it, as extraction found it (a
    /// [`Kind::Person`] value), if any.
    pub person: Option<String>,
}

/// Most header lines read before the header block is taken as ended.
const MAX_HEADER_LINES: usize = 64;

/// The addresses of a message's header, in their roles: the lines `From:`,
/// `To:` and `Cc:` of the block that opens `text` (up to its first empty
/// line) — the form Labfy's mail reader writes a message's text in. Each
/// address is an e-mail `mentions` found on that line (`extract(text)`'s
/// mentions: offsets in characters); a person mention before it in the same
/// comma-separated item is its display name. Only for a text known to be a
/// message: any text may begin with « From: ».
pub fn message_roles(text: &str, mentions: &[Mention]) -> Vec<Addressed> {
    let mut out = Vec::new();
    let mut start = 0usize; // the line's first character
    for line in text.split('\n').take(MAX_HEADER_LINES) {
        let len = line.chars().count();
        if line.trim().is_empty() {
            break;
        }
        let role = if line.starts_with("From: ") {
            Some(Role::From)
        } else if line.starts_with("To: ") {
            Some(Role::To)
        } else if line.starts_with("Cc: ") {
            Some(Role::Cc)
        } else {
            None
        };
        if let Some(role) = role {
            let chars: Vec<char> = line.chars().collect();
            let mut person: Option<(String, usize)> = None;
            for m in mentions.iter().filter(|m| m.start >= start && m.start + m.len <= start + len) {
                let (from, to) = (m.start - start, m.start - start + m.len);
                match m.kind {
                    Kind::Person => person = Some((m.value.clone(), to)),
                    Kind::Email => {
                        // The name goes with the address when no comma
                        // (another item) lies between them.
                        let named = person.take().filter(|(_, end)| !chars[*end..from].contains(&','));
                        if !out.iter().any(|a: &Addressed| a.role == role && a.email == m.value) {
                            out.push(Addressed { role, email: m.value.clone(), person: named.map(|(n, _)| n) });
                        }
                    }
                    _ => {}
                }
            }
        }
        start += len + 1;
    }
    out
}

/// The address a message was first handed over from (SPEC A4): in the
/// `Received:` lines of the header block that opens `text`, the earliest hop
/// — the last line, as each relay writes its own above — and in its `from`
/// clause (before ` by `), the last IP address extraction found: the one the
/// relay saw the connection come from (`from HELO (name [IP])`, RFC 5321),
/// not what the sender called itself. Only for a text known to be a
/// message.
pub fn message_origin<'m>(text: &str, mentions: &'m [Mention]) -> Option<&'m Mention> {
    let mut start = 0usize;
    let mut last: Option<(usize, usize)> = None;
    for line in text.split('\n').take(MAX_HEADER_LINES) {
        let len = line.chars().count();
        if line.trim().is_empty() {
            break;
        }
        if let Some(rest) = line.strip_prefix("Received: from ") {
            // The `from` clause ends where the receiving relay's ` by ` begins.
            let clause = rest.find(" by ").map_or(rest, |i| &rest[..i]);
            let from = start + "Received: from ".len();
            last = Some((from, from + clause.chars().count()));
        }
        start += len + 1;
    }
    let (from, to) = last?;
    mentions.iter().rfind(|m| matches!(m.kind, Kind::Ipv4 | Kind::Ipv6) && m.start >= from && m.start + m.len <= to)
}

/// Words that close a letter or a message before its signature, lower
/// case, French and English.
const CLOSINGS: &[&str] = &[
    "cordialement",
    "bien cordialement",
    "très cordialement",
    "bien à vous",
    "salutations",
    "sincères salutations",
    "meilleures salutations",
    "respectueusement",
    "amicalement",
    "best regards",
    "kind regards",
    "regards",
    "sincerely",
    "yours sincerely",
    "yours faithfully",
    "best",
];

/// Lines of a signature block read after its opening line.
const SIGNATURE_LINES: usize = 6;

/// A person and the organisation a signature block puts under the name
/// (`Jean Dupont` / `Directeur financier` / `Transports Lemaître SARL`):
/// the person `works_for` it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signed {
    /// The person (a [`Kind::Person`] value).
    pub person: String,
    /// The organisation (a [`Kind::Organisation`] value).
    pub organisation: String,
}

/// The signature blocks of `text` (SPEC A2, A4): after a line that closes a
/// letter (« Cordialement, », « Best regards, ») or the delimiter `-- `, the
/// first person named in the next lines, and the first organisation named
/// after it in the same block (a title line may lie between). `mentions`
/// are `extract(text)`'s.
pub fn signatures(text: &str, mentions: &[Mention]) -> Vec<Signed> {
    let lines: Vec<(usize, &str)> = {
        let mut start = 0usize;
        text.split('\n')
            .map(|l| {
                let at = start;
                start += l.chars().count() + 1;
                (at, l)
            })
            .collect()
    };
    let mut out: Vec<Signed> = Vec::new();
    for (i, (_, line)) in lines.iter().enumerate() {
        // Closings are short: most lines are not read further.
        if line.len() > 32 {
            continue;
        }
        let closing = line.trim().trim_end_matches([',', '.', '!']).trim().to_lowercase();
        if !(CLOSINGS.contains(&closing.as_str()) || line.trim_end() == "--") {
            continue;
        }
        let block = &lines[i + 1..lines.len().min(i + 1 + SIGNATURE_LINES)];
        let (Some(first), Some(last)) = (block.first(), block.last()) else { continue };
        let (from, to) = (first.0, last.0 + last.1.chars().count());
        let mut person: Option<&Mention> = None;
        for m in mentions.iter().filter(|m| m.start >= from && m.start + m.len <= to) {
            match (m.kind, person) {
                (Kind::Person, None) => person = Some(m),
                (Kind::Organisation, Some(p)) if m.start >= p.start + p.len => {
                    let signed = Signed { person: p.value.clone(), organisation: m.value.clone() };
                    if !out.contains(&signed) {
                        out.push(signed);
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract;

    fn roles(text: &str) -> Vec<(Role, String, Option<String>)> {
        message_roles(text, &extract(text).mentions).into_iter().map(|a| (a.role, a.email, a.person)).collect()
    }

    #[test]
    fn a_message_header_says_who_sent_and_who_received() {
        let text = "From: Paul Durand <Paul.Durand@Durand.example>\n\
                    To: banque@exemple.example, Hélène Marchetti <h.marchetti@cabinet.example>\n\
                    Cc: Jérôme Lemaître <jerome@transports-lemaitre.fr>\n\
                    Subject: Virement de paul@ailleurs.example\n\
                    \n\
                    Bonjour, écrivez à support@durand.example.";
        assert_eq!(
            roles(text),
            [
                (Role::From, "paul.durand@durand.example".into(), Some("Paul Durand".into())),
                (Role::To, "banque@exemple.example".into(), None),
                (Role::To, "h.marchetti@cabinet.example".into(), Some("Hélène Marchetti".into())),
                (Role::Cc, "jerome@transports-lemaitre.fr".into(), Some("Jérôme Lemaître".into())),
            ],
            "the subject's and the body's addresses have no role"
        );
    }

    fn signed(text: &str) -> Vec<(String, String)> {
        signatures(text, &extract(text).mentions).into_iter().map(|s| (s.person, s.organisation)).collect()
    }

    #[test]
    fn a_signature_block_says_who_works_where() {
        let fr = "Bonjour,\n\nVoici le relevé demandé.\n\nBien cordialement,\n\nMme Hélène Marchetti\n                  Directrice financière\nTransports Lemaître et Fils SARL\n69007 Lyon";
        assert_eq!(signed(fr), [("Hélène Marchetti".to_owned(), "Transports Lemaître et Fils SARL".to_owned())]);
        let en = "Hi,\nplease find the invoice.\n\nBest regards,\nJohn Smith\nHead of Sales\nNordlys Logistics Ltd\n";
        assert_eq!(signed(en), [("John Smith".to_owned(), "Nordlys Logistics Ltd".to_owned())]);
        let dashes = "Texte.\n--\nPaul Durand\nDurand Conseil SAS";
        assert_eq!(signed(dashes), [("Paul Durand".to_owned(), "Durand Conseil SAS".to_owned())]);
    }

    #[test]
    fn no_closing_no_signature_and_the_order_matters() {
        // A person and a company in the body are not a signature.
        assert!(signed("Paul Durand a rencontré Durand Conseil SAS hier.").is_empty());
        // The company before the name is not the signer's.
        assert!(signed("Cordialement,\nDurand Conseil SAS\nPaul Durand").is_empty());
        // Too far below the closing: another part of the text.
        assert!(signed("Cordialement,\n\n\n\n\n\n\nPaul Durand\nDurand Conseil SAS").is_empty());
    }

    #[test]
    fn the_earliest_relay_names_where_a_message_came_from() {
        let text = "From: a@b.example\n\
                    Received: from mx.relay.example (mx.relay.example [198.51.100.7]) by mx.dest.example; Mon, 3 Feb\n\
                    Received: from [192.168.1.20] (pc.local [203.0.113.44]) by mx.relay.example (Postfix) with ESMTPSA\n\
                    Subject: x\n\n\
                    Received: from 192.0.2.1 in the body";
        let found = extract(text);
        let origin = message_origin(text, &found.mentions).map(|m| (m.kind, m.value.clone()));
        assert_eq!(
            origin,
            Some((Kind::Ipv4, "203.0.113.44".to_owned())),
            "the address the first relay saw, not the HELO"
        );
        let relayed = "Received: from mx.relay.example by mx.dest.example (198.51.100.9)\n\nBody";
        assert!(
            message_origin(relayed, &extract(relayed).mentions).is_none(),
            "an address after ` by ` is the receiver's"
        );
    }

    #[test]
    fn only_the_opening_header_block_counts() {
        // A `From:` after the first empty line is the body's (a quoted
        // message), and a text with no header block names no role.
        assert!(roles("Bonjour.\n\nFrom: a@b.example").is_empty());
        assert!(roles("Subject: x\n\nFrom: a@b.example\nTo: c@d.example").is_empty());
        assert_eq!(roles("To: c@d.example\nTo: c@d.example").len(), 1, "an address once per role");
    }
}
