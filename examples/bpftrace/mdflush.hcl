# mdflush: md (software RAID) flush requests, one event per request: who
# asked, and the disk.
#
# A port of bpftrace's tools/mdflush.bt: md_flush_request(struct mddev *,
# struct bio *), a function of the md_mod module. Module functions have
# no prototype in vmlinux's BTF, so the bio is arg1, cast to struct bio;
# its disk's name is read through struct block_device and struct gendisk.
#
# Same as mdflush.bt, where md is in use (the plan fails where the
# function does not exist: md_mod not loaded); the time is the event's
# arrival, printed by probectl.

probe "kernel" "md_flush" {
  functions = ["md_flush_request"]

  on_entry {
    event "flush" {
      fields = {
        pid    = pid
        comm   = comm
        device = cast(arg1, "struct bio").bi_bdev.bd_disk.disk_name
      }
    }
  }
}
