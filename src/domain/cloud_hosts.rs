//! Which registry hosts belong to which cloud (`spec.provider: aws|gcp|azure`), and what
//! a login needs to know about them (ECR account, region and partition; the ACR cloud
//! and its Entra scope). The host sets are Flux's (`fluxcd/pkg/auth` aws, gcp and azure
//! providers), but every pattern here is anchored at both ends: Flux's ECR expression is
//! not, so `x.dkr.ecr.us-east-1.amazonaws.com.evil.io` would pass it and is refused here.
//! Hosts are compared case-insensitively and must not carry a port. Pure: no I/O.

use std::fmt;

/// A cloud whose workload identity can log in to its registries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloudProvider {
    /// Amazon ECR (private and public).
    Aws,
    /// Google Container Registry and Artifact Registry.
    Gcp,
    /// Azure Container Registry.
    Azure,
}

impl CloudProvider {
    /// The `spec.provider` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Gcp => "gcp",
            Self::Azure => "azure",
        }
    }

    /// The host shapes this provider accepts, for error messages.
    pub fn expected_hosts(self) -> &'static str {
        match self {
            Self::Aws => {
                "<account>.dkr.ecr[-fips].<region>.amazonaws.com (or .amazonaws.com.cn, \
                 another AWS partition's suffix, or dkr-ecr.<region>.on.aws), or public.ecr.aws"
            }
            Self::Gcp => {
                "gcr.io, <region>.gcr.io, <location>-docker.pkg.dev or docker.s3nsregistry.fr"
            }
            Self::Azure => {
                "<name>.azurecr.io, <name>.azurecr.cn, <name>.azurecr.de or <name>.azurecr.us"
            }
        }
    }
}

impl fmt::Display for CloudProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A private ECR registry, `<account>.dkr.ecr[-fips].<region>.<suffix>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EcrRegistry {
    /// The 12-digit AWS account id.
    pub account: String,
    /// The region, e.g. `us-east-1`; also the STS region, as in Flux.
    pub region: String,
    /// The host names the FIPS endpoint (`dkr.ecr-fips`).
    pub fips: bool,
}

impl EcrRegistry {
    /// The DNS suffix of the region's AWS partition, for the ECR and STS API endpoints
    /// (the partition table of the AWS SDKs: `cn-*` is `amazonaws.com.cn`, and so on).
    pub fn api_dns_suffix(&self) -> &'static str {
        partition_dns_suffix(&self.region)
    }
}

/// The DNS suffix of the AWS partition `region` belongs to.
pub fn partition_dns_suffix(region: &str) -> &'static str {
    const PARTITIONS: [(&str, &str); 6] = [
        ("cn-", "amazonaws.com.cn"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("us-iso-", "c2s.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
        ("eusc-", "amazonaws.eu"),
    ];
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("amazonaws.com", |(_, suffix)| suffix)
}

/// The Azure cloud an ACR host lives in: it decides the Entra scope of the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AzureCloud {
    /// `*.azurecr.io` (and the retired `*.azurecr.de`, which Flux treats as public).
    Public,
    /// `*.azurecr.cn`.
    China,
    /// `*.azurecr.us`.
    Government,
}

impl AzureCloud {
    /// The Entra scope of an ACR token in this cloud.
    pub fn acr_scope(self) -> &'static str {
        match self {
            Self::Public => "https://containerregistry.azure.net/.default",
            Self::China => "https://containerregistry.azure.cn/.default",
            Self::Government => "https://containerregistry.azure.us/.default",
        }
    }

    /// The Entra authority used when `AZURE_AUTHORITY_HOST` is not set.
    pub fn default_authority(self) -> &'static str {
        match self {
            Self::Public => "https://login.microsoftonline.com/",
            Self::China => "https://login.chinacloudapi.cn/",
            Self::Government => "https://login.microsoftonline.us/",
        }
    }
}

/// A registry host recognised as one cloud's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloudRegistry {
    /// A private ECR registry.
    Ecr(EcrRegistry),
    /// `public.ecr.aws` (its tokens come from us-east-1).
    PublicEcr,
    /// A Google registry; one access token serves every Google registry.
    Google {
        /// The host, lower-case.
        host: String,
    },
    /// An Azure Container Registry.
    Acr {
        /// The host, lower-case; the token exchange happens on it.
        host: String,
        /// Its cloud.
        cloud: AzureCloud,
    },
}

impl CloudRegistry {
    /// The provider this registry belongs to.
    pub fn provider(&self) -> CloudProvider {
        match self {
            Self::Ecr(_) | Self::PublicEcr => CloudProvider::Aws,
            Self::Google { .. } => CloudProvider::Gcp,
            Self::Acr { .. } => CloudProvider::Azure,
        }
    }

    /// What a registry login is shared by, as in Flux's cache key: an ECR token serves
    /// every registry of its region, a Google token every Google registry, an ACR
    /// refresh token only its own registry.
    pub fn login_scope(&self) -> String {
        match self {
            Self::Ecr(e) => format!("ecr:{}:fips={}", e.region, e.fips),
            Self::PublicEcr => "ecr-public".to_string(),
            Self::Google { .. } => "gcp".to_string(),
            Self::Acr { host, .. } => format!("acr:{host}"),
        }
    }
}

/// `host` does not belong to the chosen provider.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("registry host '{host}' is not a registry of provider '{provider}': expected {expected}")]
pub struct HostMismatch {
    /// The provider.
    pub provider: CloudProvider,
    /// The host as given.
    pub host: String,
    /// The accepted shapes.
    pub expected: &'static str,
}

/// The registry `host` (from `spec.url`) as a registry of `provider`, or why not.
pub fn registry(provider: CloudProvider, host: &str) -> Result<CloudRegistry, HostMismatch> {
    let lower = host.to_ascii_lowercase();
    let found = match provider {
        CloudProvider::Aws => aws(&lower),
        CloudProvider::Gcp => gcp(&lower),
        CloudProvider::Azure => azure(&lower),
    };
    found.ok_or_else(|| HostMismatch {
        provider,
        host: host.to_string(),
        expected: provider.expected_hosts(),
    })
}

/// DNS suffixes of ECR registry hosts, longest first where one ends another.
const ECR_SUFFIXES: [&str; 8] = [
    "amazonaws.com.cn",
    "amazonaws.com",
    "amazonaws.eu",
    "sc2s.sgov.gov",
    "c2s.ic.gov",
    "cloud.adc-e.uk",
    "csp.hci.ic.gov",
    "on.aws",
];

fn aws(host: &str) -> Option<CloudRegistry> {
    if host == "public.ecr.aws" {
        return Some(CloudRegistry::PublicEcr);
    }
    let rest = ECR_SUFFIXES
        .iter()
        .find_map(|s| host.strip_suffix(s)?.strip_suffix('.'))?;
    // rest = <account>.dkr.ecr[-fips].<region> or <account>.dkr-ecr[-fips].<region>
    let (rest, region) = rest.rsplit_once('.')?;
    let (account, service) = rest.split_once('.')?;
    let fips = match service {
        "dkr.ecr" | "dkr-ecr" => false,
        "dkr.ecr-fips" | "dkr-ecr-fips" => true,
        _ => return None,
    };
    let label = |s: &str, allowed: fn(u8) -> bool| {
        !s.is_empty() && s.bytes().all(allowed) && !s.starts_with('-') && !s.ends_with('-')
    };
    if account.len() != 12 || !label(account, |b| b.is_ascii_digit()) {
        return None;
    }
    if !label(region, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
    }) {
        return None;
    }
    Some(CloudRegistry::Ecr(EcrRegistry {
        account: account.to_string(),
        region: region.to_string(),
        fips,
    }))
}

/// A non-empty host prefix made of DNS labels (letters, digits, '-', '.').
fn dns_prefix(prefix: &str) -> bool {
    !prefix.is_empty()
        && prefix.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

fn gcp(host: &str) -> Option<CloudRegistry> {
    let ok = host == "gcr.io"
        || host == "docker.s3nsregistry.fr"
        || host.strip_suffix(".gcr.io").is_some_and(dns_prefix)
        || host.strip_suffix("-docker.pkg.dev").is_some_and(dns_prefix);
    ok.then(|| CloudRegistry::Google {
        host: host.to_string(),
    })
}

fn azure(host: &str) -> Option<CloudRegistry> {
    let (name, cloud) = [
        (".azurecr.io", AzureCloud::Public),
        (".azurecr.de", AzureCloud::Public),
        (".azurecr.cn", AzureCloud::China),
        (".azurecr.us", AzureCloud::Government),
    ]
    .iter()
    .find_map(|(suffix, cloud)| Some((host.strip_suffix(suffix)?, *cloud)))?;
    dns_prefix(name).then(|| CloudRegistry::Acr {
        host: host.to_string(),
        cloud,
    })
}

#[cfg(test)]
#[path = "cloud_hosts_tests.rs"]
mod tests;
