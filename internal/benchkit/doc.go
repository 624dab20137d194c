// Package benchkit is the measuring kit shared by `cast bench` (in this
// module) and the side-by-side suite (the bench/ module): a preallocated
// latency recorder with exact percentiles, and the result row every
// workload reports. It measures; it never decides pass or fail.
package benchkit
