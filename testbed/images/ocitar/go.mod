// ocitar writes an OCI image-layout tarball from a rootfs tar (hack/images.sh). Its own module,
// standard library only, so the product's go.mod stays as it is.
module kolotoc.dev/hack/images/ocitar

go 1.22
