//! One page of a tag list, parsed by a streaming serde visitor straight into the
//! listing's [`Sink`]: only tags of the distribution spec's grammar (at most 128
//! characters) are kept, each charged against the listing's memory and count caps as it
//! is read; an invalid tag is never copied, only described for the warning. Borrowed
//! from the page buffer, so a page costs its body and nothing per skipped entry. No HTTP.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::domain::reference::valid_tag;

/// What one kept tag costs besides its bytes.
pub(super) const TAG_OVERHEAD: u64 = std::mem::size_of::<String>() as u64;
/// Characters of a skipped tag shown in the warning.
const SHOWN: usize = 40;

/// A cap the listing ran into while a page was parsed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Cap {
    Count,
    Memory,
}

/// What the listing has kept so far, and its caps.
pub(super) struct Sink {
    /// Valid tags kept, in the registry's order.
    pub tags: Vec<String>,
    kept_bytes: u64,
    max_bytes: u64,
    max_tags: usize,
    /// Pages requested.
    pub pages: u64,
    /// Valid tags on the current page.
    pub valid_on_page: usize,
    /// Invalid tags skipped.
    pub skipped: u64,
    /// The first skipped tag, described.
    pub first_skipped: Option<String>,
    /// The cap a page ran into, if any.
    pub hit: Option<Cap>,
}

/// One element of a page's `tags` array: kept, or only described.
enum Entry {
    Valid(String),
    Invalid(String),
}

impl Sink {
    /// An empty listing with its caps.
    pub fn new(max_bytes: u64, max_tags: usize) -> Self {
        Self {
            tags: Vec::new(),
            kept_bytes: 0,
            max_bytes,
            max_tags,
            pages: 0,
            valid_on_page: 0,
            skipped: 0,
            first_skipped: None,
            hit: None,
        }
    }

    /// Counts `cost` bytes against the memory cap.
    pub fn charge(&mut self, cost: u64) -> Result<(), Cap> {
        if self.kept_bytes.saturating_add(cost) > self.max_bytes {
            return Err(Cap::Memory);
        }
        self.kept_bytes += cost;
        Ok(())
    }

    fn offer(&mut self, entry: Entry) -> Result<(), Cap> {
        match entry {
            Entry::Valid(tag) => {
                if self.tags.len() >= self.max_tags {
                    return Err(Cap::Count);
                }
                self.charge(tag.len() as u64 + TAG_OVERHEAD)?;
                self.tags.push(tag);
                self.valid_on_page += 1;
            }
            Entry::Invalid(shown) => {
                self.skipped += 1;
                self.first_skipped.get_or_insert(shown);
            }
        }
        Ok(())
    }
}

/// A tag as the warning shows it: escaped, cut after [`SHOWN`] characters, with its size.
fn describe(tag: &str) -> String {
    let head: String = tag.chars().take(SHOWN).collect();
    let more = if tag.chars().nth(SHOWN).is_some() {
        "..."
    } else {
        ""
    };
    format!("\"{}{more}\" ({} bytes)", head.escape_debug(), tag.len())
}

impl<'de> de::Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Entry;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tag string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
                Ok(if valid_tag(v) {
                    Entry::Valid(v.to_owned())
                } else {
                    Entry::Invalid(describe(v))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses one page `{"name": ..., "tags": [...] | null}` into the sink.
pub(super) struct Page<'s>(pub &'s mut Sink);

impl<'de> DeserializeSeed<'de> for Page<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Page<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tag list object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "tags" {
                map.next_value_seed(Tags(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `tags` value: `null` or an array of strings.
struct Tags<'s>(&'s mut Sink);

impl<'de> DeserializeSeed<'de> for Tags<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Tags<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tags or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(entry) = seq.next_element::<Entry>()? {
            if let Err(cap) = self.0.offer(entry) {
                self.0.hit = Some(cap);
                return Err(de::Error::custom("tag list cap reached"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sink(max_bytes: u64, max_tags: usize) -> Sink {
        Sink::new(max_bytes, max_tags)
    }

    fn parse(s: &mut Sink, json: &str) -> Result<(), serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(json);
        Page(s).deserialize(&mut de).and_then(|()| de.end())
    }

    #[test]
    fn pages_keep_valid_tags_and_describe_the_first_skipped_one() {
        let long = "a".repeat(129);
        let mut s = sink(1 << 20, 100);
        let page = format!(
            r#"{{"name":"a/b","tags":["v1","{long}","-x","v\u0032",""],"extra":{{"n":[1]}}}}"#
        );
        parse(&mut s, &page).unwrap();
        assert_eq!(s.tags, ["v1", "v2"]);
        assert_eq!(s.skipped, 3);
        let shown = s.first_skipped.clone().unwrap();
        assert!(
            shown.contains("...") && shown.contains("(129 bytes)"),
            "{shown}"
        );
        assert!(shown.len() < 80, "{shown}");
        let mut empty = sink(1 << 20, 100);
        parse(&mut empty, r#"{"name":"a/b","tags":null}"#).unwrap();
        parse(&mut empty, r#"{"name":"a/b"}"#).unwrap();
        assert!(empty.tags.is_empty());
        assert!(parse(&mut empty, r#"{"tags":[1]}"#).is_err());
    }

    #[test]
    fn caps_stop_the_page_and_say_which() {
        let mut s = sink(1 << 20, 2);
        assert!(parse(&mut s, r#"{"tags":["a","b","c"]}"#).is_err());
        assert!(matches!(s.hit, Some(Cap::Count)));
        let mut s = sink(2 * (TAG_OVERHEAD + 2), 100);
        assert!(parse(&mut s, r#"{"tags":["aa","bb","cc"]}"#).is_err());
        assert!(matches!(s.hit, Some(Cap::Memory)));
        assert_eq!(s.tags.len(), 2);
    }

    #[test]
    fn skipped_tags_are_shown_escaped() {
        assert_eq!(describe("a\u{1b}[31m"), "\"a\\u{1b}[31m\" (6 bytes)");
    }
}
