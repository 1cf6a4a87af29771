//! A wrapper that keeps credentials out of `Debug`, `Display`, logs and errors.

use std::fmt;

/// A secret value (password, token, private key). Prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// Wraps a secret.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself: call only where it is sent to its one legitimate receiver.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T> fmt::Display for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Username and password for one registry host (basic auth, or the token flow's login).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User name; not secret.
    pub username: String,
    /// Password or identity token.
    pub password: Redacted<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials {
            username: "bob".into(),
            password: Redacted::new("hunter2".into()),
        };
        let shown = format!("{c:?}");
        assert!(shown.contains("bob"));
        assert!(!shown.contains("hunter2"));
    }
}
