//! `WWW-Authenticate` challenges and the token service's answer, as the registry client
//! handles them (`registry::auth` and `RegistryClient::fetch_token`): `parse_challenge`,
//! `AuthState::learn` / `authorization`, the token request URL built from the realm, and
//! the token JSON (`TokenResponse::into_token`, `AuthState::store_token`).
//!
//! Input fields (separated by `FIELD`): header value, token JSON, scope.
//!
//! Checked: a Bearer challenge re-rendered with quoted parameters parses to the same
//! value; the scheme is case-insensitive; after a Basic challenge with credentials the
//! client sends `Basic <base64>` and never the password in clear; a stored token is
//! served for its scope only, and never shows in `Debug`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::secret::{Credentials, Redacted};
use ocisource::registry::auth::{
    parse_challenge, AuthState, Authorization, Challenge, TokenResponse,
};
use ocisource_fuzz::{bytes, field, split, FIELD};

const PASSWORD: &str = "fuzz-password-7d1c";

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 3);
    let header = field(&parts, 0);
    let token_json = bytes(&parts, 1);
    let scope = field(&parts, 2);

    let Some(challenge) = parse_challenge(&header) else {
        return;
    };
    // The scheme is matched without regard to case.
    let trimmed = header.trim();
    let (scheme, rest) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
    let flipped = format!("{} {rest}", flip_case(scheme));
    assert_eq!(
        parse_challenge(&flipped).as_ref(),
        Some(&challenge),
        "scheme case"
    );

    if let Challenge::Bearer {
        realm,
        service,
        scope: challenge_scope,
    } = &challenge
    {
        let fields = [Some(realm), service.as_ref(), challenge_scope.as_ref()];
        if fields.iter().flatten().all(|v| !v.contains('"')) {
            let mut shown = format!("Bearer realm=\"{realm}\"");
            if let Some(s) = service {
                shown.push_str(&format!(",service=\"{s}\""));
            }
            if let Some(s) = challenge_scope {
                shown.push_str(&format!(", scope=\"{s}\""));
            }
            assert_eq!(
                parse_challenge(&shown).as_ref(),
                Some(&challenge),
                "{shown}"
            );
        }
        // `fetch_token`: the realm must be a URL; service and scope go into its query.
        if let Ok(mut url) = url::Url::parse(realm) {
            {
                let mut q = url.query_pairs_mut();
                if let Some(s) = service {
                    q.append_pair("service", s);
                }
                q.append_pair("scope", &scope);
            }
            let again = url::Url::parse(url.as_str()).expect("a token URL re-parses");
            assert!(again
                .query_pairs()
                .any(|(k, v)| k == "scope" && v == scope.as_str()));
        }
    }

    let state = AuthState::new(Some(Credentials {
        username: "fuzz".into(),
        password: Redacted::new(PASSWORD.into()),
    }));
    assert!(
        state.learn(&challenge),
        "the first challenge changes the mode"
    );
    assert!(
        !state.learn(&challenge),
        "the same challenge twice changes nothing"
    );
    match (&challenge, state.authorization(&scope)) {
        (Challenge::Basic, Authorization::Header(h)) => {
            assert!(h.expose().starts_with("Basic "));
            assert!(!h.expose().contains(PASSWORD));
        }
        (Challenge::Bearer { realm, .. }, Authorization::NeedToken { realm: r, .. }) => {
            assert_eq!(realm, &r);
        }
        (_, other) => panic!("unexpected authorization {}", describe(&other)),
    }

    let Ok(response) = serde_json::from_slice::<TokenResponse>(token_json) else {
        return;
    };
    let Some((token, life)) = response.into_token() else {
        return;
    };
    assert!(life.as_secs() >= 5, "token life {life:?}");
    assert_eq!(format!("{token:?}"), "<redacted>");
    state.store_token(&scope, token.clone(), life);
    if let Challenge::Bearer { .. } = challenge {
        match state.authorization(&scope) {
            Authorization::Header(h) => {
                assert_eq!(h.expose(), &format!("Bearer {}", token.expose()))
            }
            other => panic!("stored token not used: {}", describe(&other)),
        }
        let other_scope = format!("{scope}#other");
        assert!(matches!(
            state.authorization(&other_scope),
            Authorization::NeedToken { .. }
        ));
        state.drop_token(&scope);
        assert!(matches!(
            state.authorization(&scope),
            Authorization::NeedToken { .. }
        ));
    }
});

fn flip_case(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_lowercase() {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn describe(a: &Authorization) -> &'static str {
    match a {
        Authorization::None => "none",
        Authorization::Header(_) => "header",
        Authorization::NeedToken { .. } => "need token",
    }
}
