package pathbench

import "errors"

func isRefused(err error) bool { return errors.Is(err, errRefused) }
