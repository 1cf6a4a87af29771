module ocisource.invalid/hack/referrers-registry

go 1.25.0

require github.com/google/go-containerregistry v0.21.6
