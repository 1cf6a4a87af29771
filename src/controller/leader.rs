//! Leader election with a `coordination.k8s.io/v1` Lease, for `--leader-elect`: only the
//! holder reconciles (and so writes artifacts and status); the others wait. The holder
//! renews every third of the lease duration; a holder that cannot renew within the lease
//! duration stops, so two replicas never reconcile at once for long. Each process campaigns
//! under its own [`identity`]: the pod name (downward API `POD_NAME`) or the host name,
//! plus a random suffix, so no two replicas (all PID 1 in their containers) and no
//! restarted process ever share one, as client-go's `hostname_<uuid>` does.
//!
//! Kept our own rather than `kube-lease-manager` (0.13, which does support kube 5): in its
//! `watch()` mode a holder whose renewals fail (API server unreachable) logs the error,
//! backs off and keeps reporting itself leader past the lease's expiry, while another
//! replica may take the expired Lease: two writers. client-go's `renewDeadline` and this
//! module stop a holder that has not renewed within the lease duration; that bound is the
//! point of leader election here, so the ~100 lines stay.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

/// Failed to make this process's identity.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The system's random source failed.
    #[error("failed to read random bytes for the leader-election identity: {0}")]
    Random(String),
}

/// This process's Lease identity: `<pod name>_<16 hex digits>`, the pod name from
/// `POD_NAME` (the chart sets it from the downward API), else the host name (a pod's
/// host name is its name), with a random suffix drawn once per call.
pub fn identity() -> Result<String, LeaderError> {
    let random = getrandom::u64().map_err(|e| LeaderError::Random(e.to_string()))?;
    let pod = std::env::var("POD_NAME").ok();
    let host = hostname::get()
        .ok()
        .map(|h| h.to_string_lossy().into_owned());
    Ok(identity_from(pod.as_deref(), host.as_deref(), random))
}

/// [`identity`] from its parts (pure): the first non-empty of `pod` and `host` (else
/// `ocisource`), `_`, and `random` in hex.
pub fn identity_from(pod: Option<&str>, host: Option<&str>, random: u64) -> String {
    let base = [pod, host]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or("ocisource");
    format!("{base}_{random:016x}")
}

/// Lease settings.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub duration: Duration,
}

/// The outcome of one acquisition attempt, decided from the current Lease (pure).
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it or the holder's lease expired: take it.
    Take,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds a valid lease.
    Wait,
}

/// Decides what to do with `lease` at `now`.
pub fn decide(lease: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = lease else {
        return Decision::Take;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    let seconds = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    let expired = match &spec.renew_time {
        Some(MicroTime(t)) => t.as_second() + seconds < now.as_second(),
        None => true,
    };
    if holder.is_empty() || expired {
        Decision::Take
    } else {
        Decision::Wait
    }
}

fn spec_for(cfg: &LeaseConfig, previous: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
    let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
    let changed =
        previous.and_then(|p| p.holder_identity.as_deref()) != Some(cfg.identity.as_str());
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: i32::try_from(cfg.duration.as_secs()).ok(),
        acquire_time: if changed {
            Some(MicroTime(now))
        } else {
            previous.and_then(|p| p.acquire_time.clone())
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if changed && previous.is_some() {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// One attempt to take or renew the lease; `Ok(true)` when we hold it afterwards.
pub async fn try_acquire(client: &Client, cfg: &LeaseConfig) -> Result<bool, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let now = Timestamp::now();
    match api.get_opt(&cfg.name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec_for(cfg, None, now)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.is_already_exists() || s.is_conflict() => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(mut lease) => match decide(lease.spec.as_ref(), &cfg.identity, now) {
            Decision::Wait => Ok(false),
            Decision::Take | Decision::Renew => {
                lease.spec = Some(spec_for(cfg, lease.spec.as_ref(), now));
                // replace() carries resourceVersion: a concurrent winner makes this a 409.
                match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
                    Err(e) => Err(e),
                }
            }
        },
    }
}

/// Blocks until this replica holds the lease, then keeps renewing it in the background.
/// The returned receiver turns `true` when the lease is lost; the caller must stop.
pub async fn acquire_and_hold(
    client: Client,
    cfg: LeaseConfig,
) -> tokio::sync::watch::Receiver<bool> {
    let retry = cfg.duration / 3;
    loop {
        match try_acquire(&client, &cfg).await {
            Ok(true) => break,
            Ok(false) => tracing::info!(lease = %cfg.name, "waiting for the leader lease"),
            Err(e) => {
                tracing::warn!(lease = %cfg.name, error = %e, "failed to read the leader lease")
            }
        }
        tokio::time::sleep(retry).await;
    }
    tracing::info!(lease = %cfg.name, identity = %cfg.identity, "acquired the leader lease");
    let (lost_tx, lost_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(retry).await;
            match try_acquire(&client, &cfg).await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => {
                    let _ = lost_tx.send(true);
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "failed to renew the leader lease"),
            }
            if last_renewal.elapsed() > cfg.duration {
                let _ = lost_tx.send(true);
                return;
            }
        }
    });
    lost_rx
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_the_pod_or_host_name_with_a_random_suffix() {
        assert_eq!(
            identity_from(Some("ocisource-7d9f-abc"), Some("h"), 0xbeef),
            "ocisource-7d9f-abc_000000000000beef"
        );
        assert_eq!(
            identity_from(None, Some("node-a"), 1),
            "node-a_0000000000000001"
        );
        assert_eq!(
            identity_from(Some(""), Some(" "), 2),
            "ocisource_0000000000000002"
        );
        assert_eq!(
            identity_from(None, None, u64::MAX),
            "ocisource_ffffffffffffffff"
        );
    }

    #[test]
    fn two_processes_of_the_same_pod_get_different_identities() {
        // Same POD_NAME and host name (every replica of the scratch image is PID 1):
        // only the random suffix tells them apart, and it does.
        let a = identity().unwrap();
        let b = identity().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.rsplit_once('_').unwrap().0, b.rsplit_once('_').unwrap().0);
        assert_ne!(
            decide(None, &a, Timestamp::from_second(1).unwrap()),
            Decision::Wait
        );
        let held = LeaseSpec {
            holder_identity: Some(a.clone()),
            renew_time: Some(MicroTime(Timestamp::from_second(1).unwrap())),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        };
        assert_eq!(
            decide(Some(&held), &b, Timestamp::from_second(2).unwrap()),
            Decision::Wait
        );
    }

    fn spec(holder: &str, renewed: i64, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(decide(None, "a", now), Decision::Take);
        assert_eq!(decide(Some(&spec("a", 990, 15)), "a", now), Decision::Renew);
        assert_eq!(decide(Some(&spec("b", 990, 15)), "a", now), Decision::Wait);
        assert_eq!(decide(Some(&spec("b", 900, 15)), "a", now), Decision::Take);
        assert_eq!(decide(Some(&spec("", 999, 15)), "a", now), Decision::Take);
    }
}
