//! The distribution spec's error body (`{"errors": [{"code", "message", "detail"}]}`),
//! read from a failed answer and worded as go-containerregistry words it
//! (`transport.Error`: `CODE: message; detail`, the detail printed as Go's `%v` prints the
//! `interface{}` JSON decodes into). Flux's source-controller quotes that text in its
//! conditions, so drop-in mode can say exactly what Flux says. Also Go's words for a
//! refused connection, as go-containerregistry's ping reports it ([`dial_refused`]).
//! Our own code because the rendering is Go's `fmt` on decoded JSON and Go's `net`
//! errors, which no crate reproduces; it is small.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

use crate::domain::text::{bounded, CONDITION_MESSAGE_MAX};

/// Largest error body read.
pub(crate) const MAX_ERROR_BODY: u64 = 16 * 1024;

/// The body's errors as go-containerregistry renders them, or `None` when the body is
/// not the spec's error JSON (or lists no error). The text is the registry's: its
/// control characters are escaped and it is cut to a condition message's length
/// (`domain::text::bounded`; Go's `%v` of a 16 KiB body can be three times longer).
pub(crate) fn render(body: &[u8]) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let errors = json.get("errors")?.as_array()?;
    let each: Vec<String> = errors.iter().map(diagnostic).collect::<Option<_>>()?;
    let text = match each.as_slice() {
        [] => return None,
        [one] => one.clone(),
        many => format!("multiple errors returned: {}", many.join("; ")),
    };
    Some(bounded(&text, CONDITION_MESSAGE_MAX).into_owned())
}

/// What go-containerregistry's ping of `host` says when every connection is refused:
/// `Get "https://HOST/v2/": dial tcp ADDR: connect: connection refused`, then the same for
/// `http://` when it falls back to plain HTTP (`plain_too`: Flux's `insecure`, or a local
/// or private host), joined with `; `. `None` unless `host` is an IP address (with or
/// without a port): for a name, Go's text carries the address its resolver picked.
pub(crate) fn dial_refused(host: &str, plain_too: bool) -> Option<String> {
    let (ip, port): (IpAddr, Option<u16>) = match host.parse::<SocketAddr>() {
        Ok(sa) => (sa.ip(), Some(sa.port())),
        Err(_) => (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .ok()?,
            None,
        ),
    };
    let one = |scheme: &str, default_port: u16| {
        let addr = SocketAddr::new(ip, port.unwrap_or(default_port));
        format!("Get \"{scheme}://{host}/v2/\": dial tcp {addr}: connect: connection refused")
    };
    let mut text = one("https", 443);
    if plain_too {
        text.push_str("; ");
        text.push_str(&one("http", 80));
    }
    Some(text)
}

/// One `{code, message, detail}` entry: `CODE: message`, then `; detail` when present.
fn diagnostic(entry: &Value) -> Option<String> {
    let text = |key: &str| match entry.get(key) {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => None,
    };
    let mut out = format!("{}: {}", text("code")?, text("message")?);
    if let Some(detail) = entry.get("detail").filter(|d| !d.is_null()) {
        out.push_str("; ");
        out.push_str(&go_value(detail));
    }
    Some(out)
}

/// Go's `%v` of the value `encoding/json` decodes into an `interface{}`: maps with sorted
/// keys as `map[k:v ...]`, slices as `[a b]`, numbers as float64 (`%v` is `%g`).
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), go_float),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let pairs: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_value(&map[k])))
                .collect();
            format!("map[{}]", pairs.join(" "))
        }
    }
}

/// A float64 as `%v` prints it: the shortest form, exponent notation from 1e21 up (and
/// below 1e-4), as Go's `strconv.FormatFloat(f, 'g', -1, 64)` with `%v`'s threshold.
fn go_float(f: f64) -> String {
    let magnitude = f.abs();
    if f == 0.0 || (1e-4..1e21).contains(&magnitude) {
        return format!("{f}");
    }
    let text = format!("{f:e}");
    // Rust writes `1e21` and `1.5e-5`; Go writes `1e+21` and `1.5e-05`.
    match text.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn distribution_answers_are_worded_as_go_containerregistry_words_them() {
        // Bodies as distribution 2.8 sends them (tests/cluster_drop_in_failures.rs
        // compares the result with source-controller's conditions).
        let cases: [(&str, &str); 4] = [
            (
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"nope"}}]}"#,
                "MANIFEST_UNKNOWN: manifest unknown; map[Tag:nope]",
            ),
            (
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":[{"Type":"repository","Class":"","Name":"app/config","Action":"pull"}]}]}"#,
                "UNAUTHORIZED: authentication required; [map[Action:pull Class: Name:app/config Type:repository]]",
            ),
            (
                r#"{"errors":[{"code":"DENIED","message":"no"},{"code":"X","message":"y","detail":null}]}"#,
                "multiple errors returned: DENIED: no; X: y",
            ),
            (
                r#"{"errors":[{"code":"C","message":"m","detail":{"n":5,"f":1.5,"big":1e21,"t":true,"z":null}}]}"#,
                "C: m; map[big:1e+21 f:1.5 n:5 t:true z:<nil>]",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(render(body.as_bytes()).as_deref(), Some(want), "{body}");
        }
    }

    #[test]
    fn a_huge_or_hostile_body_is_cut_and_escaped() {
        // 14 KB of JSON, which Go's `%v` prints at about the same length.
        let detail: Vec<Value> = (0..800).map(|i| serde_json::json!([i, i, i, i])).collect();
        let body = serde_json::json!({"errors": [{
            "code": "DENIED",
            "message": "no\u{1b}[2J\nlevel=info msg=forged",
            "detail": detail,
        }]});
        let body = serde_json::to_vec(&body).unwrap();
        assert!(
            body.len() > 14_000 && body.len() <= MAX_ERROR_BODY as usize,
            "{}",
            body.len()
        );
        let text = render(&body).unwrap();
        assert!(text.len() <= CONDITION_MESSAGE_MAX, "{}", text.len());
        assert!(
            text.starts_with("DENIED: no\\x1b[2J\\nlevel=info msg=forged; [[0 0 0 0] [1 1 1 1]"),
            "{text}"
        );
        assert!(text.ends_with(" more bytes)"), "{text}");
    }

    #[test]
    fn other_bodies_have_no_rendering() {
        for body in [
            "",
            "not json",
            "{}",
            r#"{"errors":[]}"#,
            r#"{"errors":[{"code":5}]}"#,
        ] {
            assert_eq!(render(body.as_bytes()), None, "{body}");
        }
        assert_eq!(go_float(1.5e-5), "1.5e-05");
        assert_eq!(go_float(0.25), "0.25");
    }

    #[test]
    fn refused_connections_are_worded_as_go_dials() {
        // Checked whole against source-controller's condition by
        // tests/cluster_drop_in_after.rs (registry-gone).
        let refused = |url: &str, addr: &str| {
            format!("Get \"{url}\": dial tcp {addr}: connect: connection refused")
        };
        assert_eq!(
            dial_refused("127.0.0.1:5000", true).unwrap(),
            format!(
                "{}; {}",
                refused("https://127.0.0.1:5000/v2/", "127.0.0.1:5000"),
                refused("http://127.0.0.1:5000/v2/", "127.0.0.1:5000")
            )
        );
        assert_eq!(
            dial_refused("203.0.113.7", false).unwrap(),
            refused("https://203.0.113.7/v2/", "203.0.113.7:443")
        );
        assert_eq!(
            dial_refused("[::1]", true).unwrap(),
            format!(
                "{}; {}",
                refused("https://[::1]/v2/", "[::1]:443"),
                refused("http://[::1]/v2/", "[::1]:80")
            )
        );
        // A name: Go's text names the address its resolver picked, unknown here.
        assert_eq!(dial_refused("registry.example:5000", true), None);
    }
}
