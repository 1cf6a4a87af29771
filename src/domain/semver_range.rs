//! Semver ranges with Flux's (Masterminds semver v3) meaning, and the choice of the
//! highest matching tag.
//!
//! Grammar: comparators joined by spaces or commas (AND) and `||` (OR); operators
//! `= != > >= < <= ~ ~> ^`, wildcards `x X *`, partial versions (`1`, `1.2`) and hyphen
//! ranges (`1.2 - 1.4.5`). A version with a prerelease matches only when the AND group
//! it is tested against contains a comparator with a prerelease (`>=1.0.0-0` admits
//! every prerelease, as in Flux). Operators also come in Masterminds' spellings `=>`,
//! `=<` and `~>`.
//!
//! Tags are read as Flux's `version.ParseVersion` reads them: a tag is a version only
//! when it has three dot-separated parts (an optional lower-case `v` first) and parses
//! (leading zeros allowed in the numbers, as Masterminds' `NewVersion` coerces them).
//! `_` stands for `+` only in Helm chart tags ([`TagMapping::HelmChart`]); for every other
//! artifact a tag with `_` is no version.

use std::cmp::Ordering;

use semver::{BuildMetadata, Prerelease, Version};

/// One comparator, already expanded to a simple operator and a full version.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
}

/// A parsed range: OR of AND-groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRange {
    groups: Vec<Vec<Comparator>>,
}

/// A partial version as written in a range: missing or wildcard parts are `None`.
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

impl Partial {
    fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim().trim_start_matches(['v', 'V']);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (
                c,
                Prerelease::new(p).map_err(|e| format!("bad prerelease '{p}': {e}"))?,
            ),
            None => (s, Prerelease::EMPTY),
        };
        let core = core.split('+').next().unwrap_or_default();
        let mut parts = core.split('.');
        let mut next = |name: &str| -> Result<Option<u64>, String> {
            match parts.next() {
                None | Some("x" | "X" | "*") => Ok(None),
                // u64::MAX is refused too: ranges compute the next number up.
                Some(p) => match p.parse::<u64>() {
                    Ok(n) if n < u64::MAX => Ok(Some(n)),
                    Ok(_) => Err(format!("{name} '{p}' in '{s}' is too large")),
                    Err(_) => Err(format!("bad {name} '{p}' in '{s}'")),
                },
            }
        };
        let (major, minor, patch) = (next("major")?, next("minor")?, next("patch")?);
        if parts.next().is_some() {
            return Err(format!("too many version parts in '{s}'"));
        }
        if major.is_none() && s.is_empty() {
            return Err("empty version".into());
        }
        Ok(Self {
            major,
            minor,
            patch,
            pre,
        })
    }

    fn floor(&self) -> Version {
        let mut v = Version::new(
            self.major.unwrap_or(0),
            self.minor.unwrap_or(0),
            self.patch.unwrap_or(0),
        );
        v.pre = self.pre.clone();
        v
    }

    /// The first version above everything this partial covers (`1.2` → `1.3.0`).
    fn ceiling(&self) -> Option<Version> {
        match (self.major, self.minor, self.patch) {
            (None, _, _) => None,
            (Some(m), None, _) => Some(Version::new(m + 1, 0, 0)),
            (Some(m), Some(n), None) => Some(Version::new(m, n + 1, 0)),
            (Some(_), Some(_), Some(_)) => None,
        }
    }

    fn is_full(&self) -> bool {
        self.patch.is_some()
    }
}

fn cmp(op: Op, version: Version) -> Comparator {
    Comparator { op, version }
}

/// Operators, longest spellings first so that a prefix never hides a longer one.
const OPERATORS: [&str; 11] = ["~>", ">=", "=>", "<=", "=<", "!=", ">", "<", "=", "~", "^"];

fn expand(token: &str) -> Result<Vec<Comparator>, String> {
    let (op, rest) = OPERATORS
        .iter()
        .find_map(|o| token.strip_prefix(o).map(|r| (*o, r)))
        .unwrap_or(("", token));
    let p = Partial::parse(rest)?;
    let any = || vec![cmp(Op::Ge, Version::new(0, 0, 0))];
    Ok(match op {
        "" | "=" => match (p.major.is_none(), p.is_full()) {
            (true, _) => any(),
            (false, true) => vec![cmp(Op::Eq, p.floor())],
            (false, false) => {
                let mut v = vec![cmp(Op::Ge, p.floor())];
                v.extend(p.ceiling().map(|c| cmp(Op::Lt, c)));
                v
            }
        },
        "!=" => vec![cmp(Op::Ne, p.floor())],
        ">" => match p.ceiling() {
            Some(c) if !p.is_full() => vec![cmp(Op::Ge, c)],
            _ if p.major.is_none() => vec![cmp(Op::Lt, Version::new(0, 0, 0))],
            _ => vec![cmp(Op::Gt, p.floor())],
        },
        ">=" | "=>" => vec![cmp(Op::Ge, p.floor())],
        "<" => vec![cmp(Op::Lt, p.floor())],
        "<=" | "=<" => match p.ceiling() {
            Some(c) if !p.is_full() => vec![cmp(Op::Lt, c)],
            _ if p.major.is_none() => any(),
            _ => vec![cmp(Op::Le, p.floor())],
        },
        "~" | "~>" => {
            let upper = match (p.major, p.minor) {
                (Some(m), Some(n)) => Version::new(m, n + 1, 0),
                (Some(m), None) => Version::new(m + 1, 0, 0),
                _ => return Ok(any()),
            };
            vec![cmp(Op::Ge, p.floor()), cmp(Op::Lt, upper)]
        }
        "^" => {
            let upper = match (p.major, p.minor, p.patch) {
                (None, _, _) => return Ok(any()),
                (Some(0), Some(0), Some(z)) => Version::new(0, 0, z + 1),
                (Some(0), Some(n), _) if n > 0 || p.patch.is_some() => Version::new(0, n + 1, 0),
                (Some(0), Some(0), None) => Version::new(0, 1, 0),
                (Some(m), _, _) => Version::new(m + 1, 0, 0),
            };
            vec![cmp(Op::Ge, p.floor()), cmp(Op::Lt, upper)]
        }
        other => return Err(format!("unknown operator '{other}'")),
    })
}

impl VersionRange {
    /// Parses a range; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut groups = Vec::new();
        for group in text.split("||") {
            let tokens: Vec<&str> = group.split([' ', ',']).filter(|t| !t.is_empty()).collect();
            if tokens.is_empty() {
                return Err("empty range".into());
            }
            let mut comparators = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                if tokens.get(i + 1) == Some(&"-") {
                    let hi = tokens
                        .get(i + 2)
                        .ok_or("hyphen range without upper bound")?;
                    comparators.push(cmp(Op::Ge, Partial::parse(tokens[i])?.floor()));
                    let upper = Partial::parse(hi)?;
                    comparators.push(match upper.ceiling() {
                        Some(c) if !upper.is_full() => cmp(Op::Lt, c),
                        _ => cmp(Op::Le, upper.floor()),
                    });
                    i += 3;
                    continue;
                }
                // Operators may be separated from their version by a space: ">= 1.2".
                let token = match tokens[i] {
                    op if OPERATORS.contains(&op) => {
                        i += 1;
                        format!("{op}{}", tokens.get(i).ok_or("operator without version")?)
                    }
                    t => t.to_string(),
                };
                comparators.extend(expand(&token)?);
                i += 1;
            }
            groups.push(comparators);
        }
        Ok(Self { groups })
    }

    /// True when `v` satisfies the range, with Masterminds' prerelease rule.
    pub fn matches(&self, v: &Version) -> bool {
        self.groups.iter().any(|group| {
            let allows_pre = group.iter().any(|c| !c.version.pre.is_empty());
            if !v.pre.is_empty() && !allows_pre {
                return false;
            }
            group.iter().all(|c| {
                let o = cmp_precedence(v, &c.version);
                match c.op {
                    Op::Eq => o == Ordering::Equal,
                    Op::Ne => o != Ordering::Equal,
                    Op::Gt => o == Ordering::Greater,
                    Op::Ge => o != Ordering::Less,
                    Op::Lt => o == Ordering::Less,
                    Op::Le => o != Ordering::Greater,
                }
            })
        })
    }
}

/// Semver precedence: build metadata does not count.
fn cmp_precedence(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

/// The media type of a Helm chart layer: tags of such artifacts spell semver's `+` as `_`.
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// How tags spell versions: as they are, or Helm's way (`_` for `+`, which OCI tags
/// cannot hold). Flux picks Helm's way only when the layer selector asks for Helm's chart
/// layer media type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TagMapping {
    /// A tag is read as it is: `1.5.0_build1` is no version.
    #[default]
    Plain,
    /// `_` in a tag is read as `+`: `1.5.0_build1` is `1.5.0+build1`.
    HelmChart,
}

impl TagMapping {
    /// The mapping for `spec.layerSelector.mediaType` (none set: [`TagMapping::Plain`]).
    pub fn for_layer_media_type(media_type: Option<&str>) -> Self {
        if media_type == Some(HELM_CHART_LAYER) {
            Self::HelmChart
        } else {
            Self::Plain
        }
    }
}

/// Reads a tag as a version the way Flux does (`version.ParseVersion`, i.e. three
/// dot-separated parts, then Masterminds' lenient `NewVersion`): `v1.2.3`, `1.2.3-rc.1`,
/// `2025.01.02`; with [`TagMapping::HelmChart`] also `1.2.3_build.5` (`_` is `+`).
/// `None` when it is no version (`1.2`, `V1.2.3`, `latest`, `1.2.3_x` for a plain tag).
pub fn parse_tag(tag: &str, mapping: TagMapping) -> Option<Version> {
    let text = match mapping {
        TagMapping::Plain => std::borrow::Cow::Borrowed(tag),
        TagMapping::HelmChart => std::borrow::Cow::Owned(tag.replace('_', "+")),
    };
    if text.splitn(3, '.').count() != 3 {
        return None;
    }
    let rest = text.strip_prefix('v').unwrap_or(&text);
    let core_end = rest.find(['-', '+']).unwrap_or(rest.len());
    let (core, tail) = rest.split_at(core_end);
    let (pre, build) = match tail.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (tail, None),
    };
    let pre = match pre.strip_prefix('-') {
        Some("") => return None,
        Some(p) => Prerelease::new(p).ok()?,
        None if pre.is_empty() => Prerelease::EMPTY,
        None => return None,
    };
    let build = match build {
        Some("") => return None,
        Some(b) => BuildMetadata::new(b).ok()?,
        None => BuildMetadata::EMPTY,
    };
    let nums: Vec<&str> = core.split('.').collect();
    if nums.len() > 3 {
        return None;
    }
    let mut n = [0u64; 3];
    for (slot, part) in n.iter_mut().zip(&nums) {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    let mut v = Version::new(n[0], n[1], n[2]);
    v.pre = pre;
    v.build = build;
    Some(v)
}

/// The highest tag that passes `filter` (unanchored regex, as Flux) and satisfies `range`,
/// reading tags with `mapping`. Ties in precedence go to the lexically greatest tag, so
/// the choice is stable.
pub fn choose_tag<'a>(
    tags: impl IntoIterator<Item = &'a str>,
    range: &VersionRange,
    filter: Option<&regex::Regex>,
    mapping: TagMapping,
) -> Option<(&'a str, Version)> {
    tags.into_iter()
        .filter(|t| filter.is_none_or(|f| f.is_match(t)))
        .filter_map(|t| parse_tag(t, mapping).map(|v| (t, v)))
        .filter(|(_, v)| range.matches(v))
        .max_by(|(ta, a), (tb, b)| {
            cmp_precedence(a, b)
                .then_with(|| a.build.cmp(&b.build))
                .then_with(|| ta.cmp(tb))
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "semver_range_tests.rs"]
mod tests;
