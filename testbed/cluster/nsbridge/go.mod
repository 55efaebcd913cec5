// nsbridge: the test bed's only door into the local cluster's network namespace (see main.go).
module kolotoc.dev/hack/nsbridge

go 1.26.0
