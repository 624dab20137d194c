// Package benchkit is the measuring kit shared by `cast bench` (in this
// module) and the side-by-side suite (the bench/ module): a preallocated
// latency recorder with exact percentiles, the result row every workload
// reports, and what the reports print beside the rows (load average,
// host line, tables). It measures; it never decides pass or fail.
package benchkit
