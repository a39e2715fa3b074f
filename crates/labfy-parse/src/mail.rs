//! E-mail (`.eml`) and mailboxes (`.mbox`), read with Stalwart's
//! `mail-parser`: a message's headers and body are its text, its
//! attachments its children; a mailbox's messages are its children.

use std::io::Cursor;

use mail_parser::{Address, HeaderName, MessageParser, MimeHeaders};

use crate::{Child, Format, MAX_CHILDREN, Parsed};

/// Most `Received:` headers of one message kept in its text.
pub const MAX_RECEIVED: usize = 32;
/// Longest `Received:` header kept, characters.
pub const MAX_RECEIVED_CHARS: usize = 500;

fn addresses(a: Option<&Address<'_>>) -> Option<String> {
    let list: Vec<String> = a?
        .iter()
        .map(|addr| match (addr.name(), addr.address()) {
            (Some(n), Some(e)) => format!("{n} <{e}>"),
            (None, Some(e)) => e.to_owned(),
            (Some(n), None) => n.to_owned(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect();
    (!list.is_empty()).then(|| list.join(", "))
}

/// One message.
pub(crate) fn message(bytes: &[u8]) -> Parsed {
    let Some(m) = MessageParser::default().parse(bytes) else {
        return Parsed::unread("message/rfc822", "not an e-mail message");
    };
    let mut p = Parsed::binary("message/rfc822");
    p.format = Format::Email;
    let headers = [
        ("from", addresses(m.from())),
        ("to", addresses(m.to())),
        ("cc", addresses(m.cc())),
        ("subject", m.subject().map(str::to_owned)),
        ("date", m.date().map(|d| d.to_rfc3339())),
        ("message_id", m.message_id().map(str::to_owned)),
    ];
    let mut text = String::new();
    for (name, value) in headers {
        if let Some(v) = value {
            text.push_str(&format!("{}: {v}\n", header_label(name)));
            p.metadata.insert(name.to_owned(), v);
        }
    }
    // The `Received:` chain, newest hop first as written: where the
    // message came from (a sender's address an analyst pivots on; the walk
    // lost it). Each header unfolded onto one line, bounded.
    let mut hops = 0usize;
    for h in m.headers().iter().filter(|h| h.name == HeaderName::Received) {
        if hops == MAX_RECEIVED {
            p.notes.push(format!("only the first {MAX_RECEIVED} Received headers were kept"));
            break;
        }
        let Some(raw) = bytes.get(h.offset_start as usize..h.offset_end as usize) else { continue };
        let unfolded = String::from_utf8_lossy(raw).split_whitespace().collect::<Vec<_>>().join(" ");
        let line: String = unfolded.chars().take(MAX_RECEIVED_CHARS).collect();
        text.push_str(&format!("Received: {line}\n"));
        hops += 1;
    }
    if hops > 0 {
        p.metadata.insert("received".to_owned(), hops.to_string());
    }
    p.title = m.subject().map(str::to_owned);
    // The plain body where there is one; mail-parser renders an HTML-only
    // body to text itself.
    if let Some(body) = m.body_text(0) {
        text.push('\n');
        text.push_str(body.trim());
    }
    p.text = text.trim().to_owned();
    let mut n = 0usize;
    for (i, part) in m.attachments().enumerate() {
        if n == MAX_CHILDREN {
            p.notes.push(format!("only the first {MAX_CHILDREN} attachments were taken"));
            break;
        }
        let name = part.attachment_name().map_or_else(|| format!("attachment-{:03}", i + 1), str::to_owned);
        // An attached message keeps its own headers: its raw bytes.
        let bytes = match part.message() {
            Some(inner) => inner.raw_message().to_vec(),
            None => part.contents().to_vec(),
        };
        p.children.push(Child { name, bytes });
        n += 1;
    }
    if n > 0 {
        p.metadata.insert("attachments".into(), n.to_string());
    }
    p
}

fn header_label(name: &str) -> &str {
    match name {
        "from" => "From",
        "to" => "To",
        "cc" => "Cc",
        "subject" => "Subject",
        "date" => "Date",
        _ => "Message-ID",
    }
}

/// A mailbox: each message a child; its text, one line per message.
pub(crate) fn mbox(bytes: &[u8]) -> Parsed {
    let mut p = Parsed::binary("application/mbox");
    p.format = Format::Mbox;
    let mut lines = Vec::new();
    let mut count = 0usize;
    for (i, entry) in mail_parser::mailbox::mbox::MessageIterator::new(Cursor::new(bytes)).enumerate() {
        let Ok(entry) = entry else {
            p.notes.push(format!("mailbox unreadable after message {i}"));
            break;
        };
        count += 1;
        if p.children.len() == MAX_CHILDREN {
            continue;
        }
        let raw = entry.unwrap_contents();
        let summary = MessageParser::default().parse(&raw[..]).map(|m| {
            let subject = m.subject().unwrap_or("(sans objet)").to_owned();
            let from = addresses(m.from()).unwrap_or_default();
            let date = m.date().map(|d| d.to_rfc3339()).unwrap_or_default();
            format!("{subject} — {from} — {date}")
        });
        lines.push(format!("{}. {}", i + 1, summary.unwrap_or_else(|| "(illisible)".into())));
        p.children.push(Child { name: format!("message-{:04}.eml", i + 1), bytes: raw });
    }
    if count > MAX_CHILDREN {
        p.notes.push(format!("only the first {MAX_CHILDREN} of {count} messages were taken"));
    }
    p.metadata.insert("messages".into(), count.to_string());
    p.text = lines.join("\n");
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIL: &[u8] = b"From: Jean Dupont <jean@exemple.example>\r\n\
To: contact@societe.example\r\n\
Subject: =?utf-8?q?Facture_pay=C3=A9e?=\r\n\
Date: Tue, 3 Mar 2026 10:00:00 +0100\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\
\r\n\
--b\r\n\
Content-Type: text/plain; charset=iso-8859-1\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
Voir l'IBAN ci-joint, pay=E9 hier.\r\n\
--b\r\n\
Content-Type: text/plain\r\n\
Content-Disposition: attachment; filename=\"iban.txt\"\r\n\
\r\n\
FR76 3000 6000 0112 3456 7890 189\r\n\
--b--\r\n";

    #[test]
    fn a_message_gives_its_headers_body_and_attachments() {
        let p = message(MAIL);
        assert_eq!(p.format, Format::Email);
        assert_eq!(p.title.as_deref(), Some("Facture payée"));
        assert!(p.text.contains("From: Jean Dupont <jean@exemple.example>"), "{}", p.text);
        assert!(p.text.contains("payé hier"), "{}", p.text);
        assert_eq!(p.metadata["to"], "contact@societe.example");
        assert_eq!(p.children.len(), 1);
        assert_eq!(p.children[0].name, "iban.txt");
        assert!(String::from_utf8_lossy(&p.children[0].bytes).contains("FR76"));
    }

    #[test]
    fn a_mailbox_gives_one_child_per_message() {
        let mut boxed = Vec::new();
        for i in 0..3 {
            boxed.extend_from_slice(format!("From x@y Mon Jan  1 00:00:0{i} 2024\n").as_bytes());
            boxed.extend_from_slice(format!("From: x@y.example\nSubject: message {i}\n\nbody {i}\n\n").as_bytes());
        }
        let p = mbox(&boxed);
        assert_eq!(p.children.len(), 3);
        assert_eq!(p.metadata["messages"], "3");
        assert!(p.text.contains("2. message 1"), "{}", p.text);
        assert!(String::from_utf8_lossy(&p.children[2].bytes).contains("body 2"));
    }

    /// The walk: the `.eml` reader kept From, To, Cc, Subject, Date and
    /// Message-ID but dropped the `Received:` chain and the sender's IP
    /// with it. Each hop is now a line of the text, unfolded.
    #[test]
    fn the_received_chain_is_kept_one_line_per_hop() {
        let raw = "Received: from mx.azur-transit.fr (mx.azur-transit.fr [198.51.100.7])\r\n\
                   \tby mail.example.org with ESMTPS; Tue, 14 Apr 2026 09:12:45 +0200\r\n\
                   Received: from [192.168.1.20] (unknown [203.0.113.45])\r\n\
                   \tby mx.azur-transit.fr with ESMTPSA; Tue, 14 Apr 2026 09:12:44 +0200\r\n\
                   From: Anna Koehler <anna.koehler@koehler-holding.de>\r\nTo: contact@azur-transit.fr\r\n\
                   Subject: Devis\r\nMessage-ID: <20260414071244.4821@koehler-holding.de>\r\n\r\nBonjour.\r\n";
        let p = message(raw.as_bytes());
        let lines: Vec<&str> = p.text.lines().filter(|l| l.starts_with("Received: ")).collect();
        assert_eq!(
            lines,
            [
                "Received: from mx.azur-transit.fr (mx.azur-transit.fr [198.51.100.7]) by mail.example.org with \
                 ESMTPS; Tue, 14 Apr 2026 09:12:45 +0200",
                "Received: from [192.168.1.20] (unknown [203.0.113.45]) by mx.azur-transit.fr with ESMTPSA; Tue, 14 \
                 Apr 2026 09:12:44 +0200",
            ],
            "{}",
            p.text
        );
        assert_eq!(p.metadata["received"], "2");
        assert!(p.text.contains("From: Anna Koehler <anna.koehler@koehler-holding.de>"), "{}", p.text);
    }
}
