# TARGET: linux-6.1-amd64
probe "user" "u" {
  binary    = "/nonexistent/app"
  functions = ["main"]
  attach    = "uprobe.multi" # ERROR: Attach family not available
  on_entry {
    count "c" {}
  }
}
