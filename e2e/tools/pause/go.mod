module local.test/isvc-pause

go 1.26.0
