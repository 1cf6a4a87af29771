//! A fake of the TokenRequest API for object-level workload identity in process:
//! ServiceAccounts with annotations, and tokens `token-<n>-for-<namespace>/<name>`
//! (valid one hour) whose requests are recorded with their audience. The real API
//! server's TokenRequest is covered by `cluster_cloud_identity`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{TimeDelta, Utc};
use ocisource::cloud::{ServiceAccountError, ServiceAccountToken, ServiceAccountTokens};
use ocisource::domain::secret::Redacted;

/// ServiceAccounts by `namespace/name` with their annotations; records token requests.
#[derive(Default)]
pub struct FakeTokens {
    accounts: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    requests: Mutex<Vec<(String, String)>>,
}

impl FakeTokens {
    /// Creates or replaces ServiceAccount `sa` (`namespace/name`) with `annotations`.
    pub fn annotate(&self, sa: &str, annotations: &[(&str, &str)]) {
        let annotations = annotations
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        self.accounts.lock().unwrap().insert(sa.into(), annotations);
    }

    /// The token requests so far: (`namespace/name`, audience).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ServiceAccountTokens for FakeTokens {
    async fn annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, ServiceAccountError> {
        let key = format!("{namespace}/{name}");
        self.accounts
            .lock()
            .unwrap()
            .get(&key)
            .cloned()
            .ok_or(ServiceAccountError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            })
    }

    async fn token(
        &self,
        namespace: &str,
        name: &str,
        audience: &str,
    ) -> Result<ServiceAccountToken, ServiceAccountError> {
        let sa = format!("{namespace}/{name}");
        let mut requests = self.requests.lock().unwrap();
        requests.push((sa.clone(), audience.to_string()));
        Ok(ServiceAccountToken {
            token: Redacted::new(format!("token-{}-for-{sa}", requests.len())),
            expires_at: Utc::now() + TimeDelta::hours(1),
        })
    }
}
