# PostgreSQL's query latency from its USDT probes (Debian's postgresql-15
# is built with --enable-dtrace; probectl list -v
# 'usdt:/usr/lib/postgresql/15/bin/postgres:*' lists them with their
# arguments). A backend's query__start stores when it began the query,
# its query__done reads that back: a latency histogram, and the queries
# counted by their text (arg0: the query string in the backend's memory,
# 8@-144(%rbp) on Debian's build). The semaphores make PostgreSQL
# evaluate the probes only while they are attached. runtime's
# TestUSDTPostgres applies this file to a private PostgreSQL instance.
table "pg_query_started" {}

probe "user" "pg_query_start" {
  binary = "/usr/lib/postgresql/15/bin/postgres"
  usdt   = "postgresql:query__start"
  on_entry {
    store "pg_query_started" {
      key   = [tid]
      value = ktime
    }
  }
}

probe "user" "pg_query_done" {
  binary = "/usr/lib/postgresql/15/bin/postgres"
  usdt   = "postgresql:query__done"
  on_entry {
    hist "latency_us" {
      when  = has(pg_query_started, [tid])
      value = (ktime - pg_query_started[tid]) / 1000
    }
    count "queries" { by = [str(arg0, 64)] }
    delete "pg_query_started" { key = [tid] }
  }
}
