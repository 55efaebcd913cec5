// The pod sandbox's pause binary (hack/images.sh builds it into the pause image). Its own module,
// standard library only, so it builds anywhere with no download.
module kolotoc.dev/hack/images/pause

go 1.22
