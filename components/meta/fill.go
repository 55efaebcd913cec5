package meta

// How every config section fills the defaults it was not given: each Default method is a list of
// Fill calls, one a field, so that a default is read in one line beside its constant. They fill
// zero values only, so applying a section's defaults twice changes nothing.

// Fill sets *field to value when *field holds its type's zero value ("" or 0).
func Fill[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// FillPtr sets *field to a pointer to value when it is nil: a switch whose unset and false differ
// (a *bool that defaults to true).
func FillPtr[T any](field **T, value T) {
	if *field == nil {
		*field = &value
	}
}

// FillSlice sets *field to a copy of value when it is empty, so that changing the section's
// slice never changes the default it came from.
func FillSlice[T any](field *[]T, value []T) {
	if len(*field) == 0 {
		*field = append([]T(nil), value...)
	}
}
