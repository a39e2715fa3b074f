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

    #[test]
    fn only_the_opening_header_block_counts() {
        // A `From:` after the first empty line is the body's (a quoted
        // message), and a text with no header block names no role.
        assert!(roles("Bonjour.\n\nFrom: a@b.example").is_empty());
        assert!(roles("Subject: x\n\nFrom: a@b.example\nTo: c@d.example").is_empty());
        assert_eq!(roles("To: c@d.example\nTo: c@d.example").len(), 1, "an address once per role");
    }
}
