//! Docker config JSON (`config.json`, `.dockerconfigjson` Secrets): `DockerConfig::parse`
//! and the credential lookup for a host, `normalize_host`.
//!
//! Input fields (separated by `FIELD`): the JSON, then hosts one per line. The lookup
//! runs on the config without `credHelpers`/`credsStore`, so no helper program is ever
//! started by the fuzzer (the parse itself still sees them).
//!
//! Checked: secrets (passwords, `auth` values, identity tokens) never appear in the
//! config's `Debug`, in returned credentials' `Debug` or in an error message; credentials
//! found always have a user name; `normalize_host` yields no path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::secret::{Credentials, Redacted};
use ocisource::registry::docker_config::{normalize_host, DockerConfig};
use ocisource_fuzz::{bytes, field, split, FIELD};
use serde_json::Value;

/// Hosts looked up per input.
const MAX_HOSTS: usize = 8;

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 2);
    let json = bytes(&parts, 0);
    let hosts = field(&parts, 1);

    // A secret that is a word the types' `Debug` always prints (a field name such as
    // `password`, the `<redacted>` marker) cannot be told apart from it: not searched for.
    let blank = Credentials {
        username: String::new(),
        password: Redacted::new(String::new()),
    };
    let wording = format!("{blank:?} {:?}", DockerConfig::parse(b"{}"));
    let secrets: Vec<String> = secrets_of(json)
        .into_iter()
        .filter(|s| !wording.contains(s.as_str()))
        .collect();
    let parsed = DockerConfig::parse(json);
    let shown = match &parsed {
        Ok(c) => format!("{c:?}"),
        Err(e) => format!("{e} {e:?}"),
    };
    let public = public_text(json);
    for s in &secrets {
        assert!(
            !shown.contains(s.as_str()) || public.contains(s.as_str()),
            "secret in {shown}"
        );
    }
    if parsed.is_err() {
        return;
    }

    // The same config without helpers, so that lookups never run a program.
    let Ok(mut value) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    if let Some(obj) = value.as_object_mut() {
        obj.remove("credHelpers");
        obj.remove("credsStore");
    }
    let Ok(config) = DockerConfig::parse(value.to_string().as_bytes()) else {
        return;
    };
    for host in hosts.lines().take(MAX_HOSTS) {
        let h = normalize_host(host);
        assert!(!h.contains('/'), "normalised host {h:?} has a path");
        match config.credentials_for(host) {
            Ok(Some(c)) => {
                assert!(!c.username.is_empty(), "credentials without a user name");
                let shown = format!("{c:?}");
                for s in &secrets {
                    assert!(
                        !shown.contains(s.as_str()) || c.username.contains(s.as_str()),
                        "secret in {shown}"
                    );
                }
            }
            Ok(None) => {}
            Err(e) => {
                let shown = format!("{e} {e:?}");
                for s in &secrets {
                    assert!(
                        !shown.contains(s.as_str()) || public.contains(s.as_str()),
                        "secret in {shown}"
                    );
                }
            }
        }
    }
});

/// Secret values of the config long and plain enough to search for without false hits.
fn secrets_of(json: &[u8]) -> Vec<String> {
    let Ok(Value::Object(root)) = serde_json::from_slice::<Value>(json) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(Value::Object(auths)) = root.get("auths") {
        for entry in auths.values() {
            for key in ["password", "auth", "identitytoken"] {
                if let Some(Value::String(s)) = entry.get(key) {
                    if s.len() >= 8 && s.bytes().all(|b| b.is_ascii_alphanumeric()) {
                        out.push(s.clone());
                    }
                }
            }
        }
    }
    out
}

/// Everything the config's `Debug` may legitimately show: host keys, helper names and
/// user names (a secret that is also one of these cannot be told apart).
fn public_text(json: &[u8]) -> String {
    let Ok(Value::Object(root)) = serde_json::from_slice::<Value>(json) else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(Value::Object(auths)) = root.get("auths") {
        for (k, entry) in auths {
            out.push_str(k);
            out.push('\n');
            if let Some(Value::String(u)) = entry.get("username") {
                out.push_str(u);
                out.push('\n');
            }
        }
    }
    for key in ["credHelpers", "credsStore"] {
        out.push_str(&root.get(key).map(Value::to_string).unwrap_or_default());
        out.push('\n');
    }
    out
}
