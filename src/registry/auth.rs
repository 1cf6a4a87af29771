//! Registry authentication state for one session: parsing `WWW-Authenticate`
//! challenges (Basic, Bearer), the token response, and a per-scope token cache honouring
//! `expires_in`. Credentials and tokens stay inside `Redacted` and never reach logs or
//! errors. No HTTP here: the client performs the token request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::domain::secret::{Credentials, Redacted};

/// A parsed `WWW-Authenticate` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=...`.
    Basic,
    /// `Bearer realm=...,service=...,scope=...`.
    Bearer {
        /// Token endpoint.
        realm: String,
        /// `service` parameter, if given.
        service: Option<String>,
        /// `scope` parameter, if given.
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header value; `None` for unknown schemes.
pub fn parse_challenge(value: &str) -> Option<Challenge> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = parse_params(rest);
    let get = |k: &str| {
        params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
        scope: get("scope"),
    })
}

/// `k="v", k2=v2` parameters; quoted values may contain commas.
fn parse_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (val, remaining) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(end) => (q[..end].to_string(), &q[end + 1..]),
                None => (q.to_string(), ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (after[..end].trim().to_string(), &after[end..]),
                None => (after.trim().to_string(), ""),
            }
        };
        out.push((key, val));
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// Longest a token is cached, whatever the token service's `expires_in` says: a huge
/// value would overflow the expiry instant.
pub const MAX_TOKEN_LIFE: Duration = Duration::from_secs(24 * 60 * 60);

/// The token endpoint's answer (`token` or `access_token`, optional `expires_in`).
#[derive(serde::Deserialize)]
pub struct TokenResponse {
    token: Option<String>,
    access_token: Option<String>,
    expires_in: Option<u64>,
}

impl TokenResponse {
    /// The token and how long it may be used.
    pub fn into_token(self) -> Option<(Redacted<String>, Duration)> {
        let token = self.token.filter(|t| !t.is_empty()).or(self.access_token)?;
        // Registries default to 60 s; renew a little early.
        let life =
            Duration::from_secs(self.expires_in.unwrap_or(60).max(10) - 5).min(MAX_TOKEN_LIFE);
        Some((Redacted::new(token), life))
    }
}

/// How this session authenticates, learnt from the first challenge.
#[derive(Clone, Debug, Default)]
enum Mode {
    #[default]
    Anonymous,
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

/// Authentication state of one session: credentials, mode, cached tokens per scope.
#[derive(Debug, Default)]
pub struct AuthState {
    credentials: Option<Credentials>,
    mode: Mutex<Mode>,
    tokens: Mutex<HashMap<String, (Redacted<String>, Instant)>>,
}

/// What the client must do to authorise a request.
pub enum Authorization {
    /// Send no `Authorization` header.
    None,
    /// Send this header value.
    Header(Redacted<String>),
    /// Fetch a token from `realm` first.
    NeedToken {
        /// Token endpoint.
        realm: String,
        /// `service` parameter.
        service: Option<String>,
    },
}

impl AuthState {
    /// State for a session with optional credentials.
    pub fn new(credentials: Option<Credentials>) -> Self {
        Self {
            credentials,
            ..Self::default()
        }
    }

    /// The session's credentials.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// `Basic <base64(user:pass)>` for the session's credentials.
    pub fn basic_header(&self) -> Option<Redacted<String>> {
        let c = self.credentials.as_ref()?;
        let raw = format!("{}:{}", c.username, c.password.expose());
        Some(Redacted::new(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )))
    }

    /// How to authorise a request needing `scope`.
    pub fn authorization(&self, scope: &str) -> Authorization {
        let mode = self.mode.lock().map(|m| m.clone()).unwrap_or_default();
        match mode {
            Mode::Anonymous => Authorization::None,
            Mode::Basic => self
                .basic_header()
                .map_or(Authorization::None, Authorization::Header),
            Mode::Bearer { realm, service } => {
                let cached = self.tokens.lock().ok().and_then(|t| {
                    t.get(scope)
                        .filter(|(_, until)| Instant::now() < *until)
                        .map(|(tok, _)| tok.clone())
                });
                match cached {
                    Some(tok) => {
                        Authorization::Header(Redacted::new(format!("Bearer {}", tok.expose())))
                    }
                    None => Authorization::NeedToken { realm, service },
                }
            }
        }
    }

    /// Records a challenge; returns false when it changes nothing (a second 401 means
    /// the login was refused).
    pub fn learn(&self, challenge: &Challenge) -> bool {
        let Ok(mut mode) = self.mode.lock() else {
            return false;
        };
        let new = match challenge {
            Challenge::Basic => Mode::Basic,
            Challenge::Bearer { realm, service, .. } => Mode::Bearer {
                realm: realm.clone(),
                service: service.clone(),
            },
        };
        let changed = !matches!(
            (&*mode, &new),
            (Mode::Basic, Mode::Basic) | (Mode::Bearer { .. }, Mode::Bearer { .. })
        );
        *mode = new;
        changed
    }

    /// Caches a token for `scope`, for at most [`MAX_TOKEN_LIFE`].
    pub fn store_token(&self, scope: &str, token: Redacted<String>, life: Duration) {
        let until = Instant::now() + life.min(MAX_TOKEN_LIFE);
        if let Ok(mut t) = self.tokens.lock() {
            t.insert(scope.to_string(), (token, until));
        }
    }

    /// Forgets the token for `scope` (the registry refused it).
    pub fn drop_token(&self, scope: &str) {
        if let Ok(mut t) = self.tokens.lock() {
            t.remove(scope);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(
            c,
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            }
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="x""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge("Bearer service=x"), None);
    }

    /// Found by `hack/fuzz` (target www_authenticate, seed
    /// `hack/fuzz/seeds/www_authenticate/huge-expires-in`): an `expires_in` near
    /// `u64::MAX` overflowed the expiry instant and panicked.
    #[test]
    fn a_huge_expires_in_is_capped_instead_of_overflowing() {
        let t: TokenResponse =
            serde_json::from_str(r#"{"token":"t","expires_in":18446744073709551615}"#).unwrap();
        let (tok, life) = t.into_token().unwrap();
        assert_eq!(life, MAX_TOKEN_LIFE);
        let state = AuthState::new(None);
        state.learn(&Challenge::Bearer {
            realm: "r".into(),
            service: None,
            scope: None,
        });
        state.store_token("s", tok.clone(), Duration::MAX);
        assert!(
            matches!(state.authorization("s"), Authorization::Header(h) if h.expose() == "Bearer t")
        );
    }

    #[test]
    fn token_response_accepts_both_field_names_and_caches_per_scope() {
        let t: TokenResponse =
            serde_json::from_str(r#"{"access_token":"abc","expires_in":300}"#).unwrap();
        let (tok, life) = t.into_token().unwrap();
        assert_eq!(tok.expose(), "abc");
        assert_eq!(life, Duration::from_secs(295));
        let state = AuthState::new(None);
        assert!(state.learn(&Challenge::Bearer {
            realm: "r".into(),
            service: None,
            scope: None
        }));
        assert!(matches!(
            state.authorization("s1"),
            Authorization::NeedToken { .. }
        ));
        state.store_token("s1", tok, life);
        assert!(
            matches!(state.authorization("s1"), Authorization::Header(h) if h.expose() == "Bearer abc")
        );
        assert!(matches!(
            state.authorization("s2"),
            Authorization::NeedToken { .. }
        ));
        assert!(!state.learn(&Challenge::Bearer {
            realm: "r".into(),
            service: None,
            scope: None
        }));
    }
}
