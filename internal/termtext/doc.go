// Package termtext renders what probectl shows a terminal or a log line:
// diagnostics at their spec positions with the source line underlined,
// and text from outside (a process name, a symbol, a file name) quoted
// when it would not print as itself.
//
// Imports nothing of probectl; of the outside only HCL's diagnostics.
package termtext
