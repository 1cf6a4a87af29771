//! The token request of the bearer flow (the Docker token specification): the realm
//! from the registry's challenge is checked (`origin::check_realm`), the session's Basic
//! credentials are bound to the realm's origin, and the token is cached per scope. The
//! token itself is sent only to the registry's origin (`client.rs`).

use super::auth::TokenResponse;
use super::body::read_capped;
use super::client::RegistryClient;
use super::failure::{err, unauthorized};
use super::origin::{check_realm, BoundCredential, Origin};
use crate::domain::secret::Redacted;
use crate::ports::{RegistryError, RegistryErrorKind};

impl RegistryClient {
    /// Fetches and caches a bearer token for `scope`; returns the header value. The
    /// session's Basic credentials go to the realm only when `check_realm` accepts it.
    pub(super) async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<Redacted<String>, RegistryError> {
        let mut url = reqwest::Url::parse(realm).map_err(|_| {
            err(
                RegistryErrorKind::Protocol,
                format!(
                    "failed to get a token: invalid realm '{realm}' in the registry's challenge"
                ),
            )
        })?;
        // The registry as it is actually spoken to: over plain HTTP once the fallback
        // (Flux's `insecure`, or a local/private host) found it speaks only that.
        let spoken = reqwest::Url::parse(&self.url_as_spoken(self.registry_url.as_str()))
            .unwrap_or_else(|_| self.registry_url.clone());
        check_realm(&spoken, &url).map_err(|e| {
            err(
                RegistryErrorKind::Protocol,
                format!("failed to get a token for {scope}: {e}; if this registry really uses that token service, pull through a registry on the same domain"),
            )
        })?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = service {
                q.append_pair("service", s);
            }
            q.append_pair("scope", scope);
        }
        let url_s = url.to_string();
        let basic = self
            .auth
            .basic_header()
            .map(|h| BoundCredential::new(h, Origin::of(&url)));
        let build = |c: &reqwest::Client| Ok(c.get(url.clone()));
        let what = format!("get a token for {scope} from");
        let resp = self
            .send_retrying(&what, &url_s, true, &build, basic.as_ref())
            .await?;
        let status = resp.status();
        if status == 401 || status == 403 {
            return Err(unauthorized(
                &what,
                realm,
                &format!("the token service answered {status}"),
                self.audience,
            ));
        }
        if !status.is_success() {
            return Err(err(
                RegistryErrorKind::Protocol,
                format!("failed to {what} {realm}: unexpected status {status}"),
            ));
        }
        let body = read_capped(resp, 1 << 20, &what, realm).await?;
        let (token, life) = serde_json::from_slice::<TokenResponse>(&body)
            .ok()
            .and_then(TokenResponse::into_token)
            .ok_or_else(|| {
                err(
                    RegistryErrorKind::Protocol,
                    format!("failed to {what} {realm}: no token in the answer"),
                )
            })?;
        let header = Redacted::new(format!("Bearer {}", token.expose()));
        self.auth.store_token(scope, token, life);
        Ok(header)
    }
}
