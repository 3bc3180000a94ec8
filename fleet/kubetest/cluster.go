package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Assets returns the directory holding the etcd, kube-apiserver and
// kube-controller-manager binaries: $PROBECTL_KUBE_ASSETS, or what lab.sh
// builds (or finds in its cache).
func Assets() (string, error) {
	if dir := os.Getenv("PROBECTL_KUBE_ASSETS"); dir != "" {
		return dir, nil
	}
	assetsOnce.Do(func() {
		_, file, _, _ := goruntime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "lab.sh")
		var stderr bytes.Buffer
		cmd := exec.Command(script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			assetsErr = fmt.Errorf("%s: %w\n%s", script, err, stderr.Bytes())
			return
		}
		assetsDir = strings.TrimSpace(string(out))
	})
	return assetsDir, assetsErr
}

func init() {
	// controller-runtime's client logs through its global logger, which
	// complains with a stack trace when nothing set it.
	ctrllog.SetLogger(logr.Discard())
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Dir holds the certificates, keys, kubeconfigs and etcd's data.
	Dir string
	// Host is the API server's URL.
	Host string
	// Admin is a client configuration in group system:masters.
	Admin *rest.Config
	// Kubeconfig is a kubeconfig file for Admin.
	Kubeconfig string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	caPEM []byte
	// adminCrt and adminKey are the admin's client certificate and key.
	adminCrt, adminKey string
	procs              []*proc
	client             *kubernetes.Clientset
	// serviceNet is the first three bytes of the service /24, random
	// (10.0-99.X): a node routes its pods' API traffic to its own cluster.
	serviceNet string
	// ctrlMu guards controllers (StartControllers ran) and proxy (the
	// kubernetes Service's stand-in for kube-proxy).
	ctrlMu      sync.Mutex
	controllers bool
	proxy       net.Listener
}

// Start starts etcd and kube-apiserver for the test and stops them when
// it ends. It fails the test when they cannot start.
//
// Under go test -short (make check) it skips the test instead: the lab
// is a build of minutes when cold, and make test runs these tests.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the kube lab (kube-apiserver, etcd): skipped under -short (make check); make test runs it")
	}
	assets, err := Assets()
	if err != nil {
		t.Fatalf("kube lab: %v", err)
	}
	dir, err := os.MkdirTemp("", "probectl-kube-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, serviceNet: randomServiceNet()}
	t.Cleanup(func() {
		c.Stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("kube lab: logs and data kept in %s", dir)
		}
	})
	if err := c.start(assets); err != nil {
		t.Fatalf("kube lab: %v", err)
	}
	return c
}

// proc is a process the cluster started; done closes when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// stop ends the process's group: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Stop stops the API server, then etcd, and waits for them.
func (c *Cluster) Stop() {
	c.stopServiceProxy()
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
}

// Clientset is a typed client with the admin's credentials.
func (c *Cluster) Clientset() *kubernetes.Clientset { return c.client }

func (c *Cluster) start(assets string) error {
	if err := c.writeCerts(); err != nil {
		return err
	}
	etcdURL, err := c.startEtcd(assets)
	if err != nil {
		return err
	}
	if err := c.startAPIServer(assets, etcdURL); err != nil {
		return err
	}
	c.Admin = &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.caPEM, CertFile: c.adminCrt, KeyFile: c.adminKey}, QPS: 200, Burst: 400}
	c.client, err = kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return err
	}
	if err := c.waitDefaultNamespace(); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	return c.WriteKubeconfig(c.Kubeconfig, c.Admin)
}

// startEtcd starts etcd on free ports, trying five times, and returns
// its client URL.
func (c *Cluster) startEtcd(assets string) (string, error) {
	var etcdURL string
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := freePorts(2)
		if perr != nil {
			return "", perr
		}
		etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		data := filepath.Join(c.Dir, "etcd")
		os.RemoveAll(data)
		err = c.run(filepath.Join(assets, "etcd"), "etcd.log",
			"--name=probectl", "--data-dir="+data, "--unsafe-no-fsync",
			"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster=probectl="+peer, "--log-level=warn")
		if err == nil {
			err = waitHTTP(nil, etcdURL+"/health", `"health":"true"`, 30*time.Second, c.procs[len(c.procs)-1])
		}
		if err == nil {
			return etcdURL, nil
		}
		c.Stop()
	}
	return "", fmt.Errorf("etcd: %w (log: %s)", err, tail(filepath.Join(c.Dir, "etcd.log")))
}

// startAPIServer starts kube-apiserver on etcdURL and waits until it is
// ready, trying another port (five times) when its port was taken.
func (c *Cluster) startAPIServer(assets, etcdURL string) error {
	f := func(name string) string { return filepath.Join(c.Dir, name) }
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := freePorts(1)
		if perr != nil {
			return perr
		}
		c.Host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		err = c.run(filepath.Join(assets, "kube-apiserver"), "kube-apiserver.log",
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(ports[0]),
			"--endpoint-reconciler-type=none",
			"--etcd-servers="+etcdURL,
			"--tls-cert-file="+f("serving.crt"), "--tls-private-key-file="+f("serving.key"),
			"--client-ca-file="+f("ca.crt"),
			"--service-account-key-file="+f("sa.pub"),
			"--service-account-signing-key-file="+f("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-cluster-ip-range="+c.serviceNet+".0/24",
			"--authorization-mode=Node,RBAC", // Node: the kubelets of StartNode
			"--allow-privileged=true",
			"--disable-admission-plugins=DefaultStorageClass,DefaultIngressClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,RuntimeClass,CertificateApproval,CertificateSigning,ClusterTrustBundleAttest,CertificateSubjectRestriction",
			"--profiling=false", "--v=1")
		if err != nil {
			break
		}
		tlsCfg, terr := c.tlsConfig()
		if terr != nil {
			return terr
		}
		err = waitHTTP(tlsCfg, c.Host+"/readyz", "ok", 90*time.Second, c.procs[len(c.procs)-1])
		if err == nil || !strings.Contains(tail(f("kube-apiserver.log")), "address already in use") {
			break
		}
		c.procs[len(c.procs)-1].stop()
		c.procs = c.procs[:len(c.procs)-1]
	}
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w (log: %s)", err, tail(f("kube-apiserver.log")))
	}
	return nil
}

// waitDefaultNamespace waits for the default namespace, which the API
// server creates just after /readyz.
func (c *Cluster) waitDefaultNamespace() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace default: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run starts a binary of the control plane (startProc), stopped by Stop.
func (c *Cluster) run(bin, logName string, args ...string) error {
	p, err := startProc(c.Dir, bin, logName, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// startProc starts a binary in dir, logging to dir/logName, in a process
// group of its own, killed when this process dies (so a killed test
// orphans nothing).
func startProc(dir, bin, logName string, args ...string) (*proc, error) {
	log, err := os.OpenFile(filepath.Join(dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the thread that forked exits: fork from a
	// thread that lives as long as the process.
	goruntime.LockOSThread()
	err = cmd.Start()
	goruntime.UnlockOSThread()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

func (c *Cluster) tlsConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca)
	cert, err := tls.LoadX509KeyPair(c.adminCrt, c.adminKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}, nil
}

// waitHTTP polls url until its body contains want, the process exits, or
// the time runs out.
func waitHTTP(tlsCfg *tls.Config, url, want string, timeout time.Duration, p *proc) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	exited := p.done
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited")
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			b := new(bytes.Buffer)
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(b.String(), want) {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(b.String()))
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %s", timeout, last)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeCerts writes the CA, the serving certificate for 127.0.0.1, the
// admin's client certificate and the service account signing key.
func (c *Cluster) writeCerts() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "probectl-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	c.ca, _ = x509.ParseCertificate(der)
	c.caKey = key
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(c.Dir, "ca.crt"), c.caPEM, 0o644); err != nil {
		return err
	}
	serving := &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(c.ServiceIP())},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := c.issue(serving, "serving"); err != nil {
		return err
	}
	if c.adminCrt, c.adminKey, err = c.ClientCert("admin", "system:masters"); err != nil {
		return err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err := os.WriteFile(filepath.Join(c.Dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

var serial int64 = 1
var serialMu sync.Mutex

// issue signs tmpl with the CA and writes NAME.crt and NAME.key.
func (c *Cluster) issue(tmpl *x509.Certificate, name string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serialMu.Lock()
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	serialMu.Unlock()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		return err
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(c.Dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// ClientCert issues a client certificate for user in groups and returns
// the paths of the certificate and its key.
func (c *Cluster) ClientCert(user string, groups ...string) (crt, key string, err error) {
	name := "user-" + strings.NewReplacer(":", "_", "/", "_").Replace(user)
	err = c.issue(&x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, name)
	return filepath.Join(c.Dir, name+".crt"), filepath.Join(c.Dir, name+".key"), err
}

// UserConfig is a client configuration authenticated as user in groups.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	crt, key, err := c.ClientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM, CertFile: crt, KeyFile: key}}, nil
}

// PodToken makes the credentials a DaemonSet's pod on node gets: it
// creates the Node (when missing) and a Pod bound to it that runs as
// serviceAccount in namespace, and requests a token for the service
// account bound to that pod (so the API server knows the node:
// userInfo.extra["authentication.kubernetes.io/node-name"]).
func (c *Cluster) PodToken(ctx context.Context, namespace, serviceAccount, node string) (*rest.Config, error) {
	cs := c.client
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		return nil, fmt.Errorf("create node %s: %w", node, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	podName := serviceAccount + "-" + node
	pod, err := cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName},
		Spec: corev1.PodSpec{NodeName: n.Name, ServiceAccountName: serviceAccount,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "agent", Image: "probectl"}}},
	}, metav1.CreateOptions{})
	if isAlreadyExists(err) {
		pod, err = cs.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", namespace, podName, err)
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: &expiry, BoundObjectRef: &authv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s bound to pod %s: %w", namespace, serviceAccount, pod.Name, err)
	}
	return &rest.Config{Host: c.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM}}, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg.
func (c *Cluster) WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lab"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: c.caPEM}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Token: cfg.BearerToken}
	kc.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "user"}
	kc.CurrentContext = "lab"
	return clientcmd.WriteToFile(*kc, path)
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// Scheme knows Kubernetes' own types and probectl.dev/v1alpha1, for the
// controller-runtime clients tests use as the cluster's admin and as
// other users (the agents use fleet.Client).
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// StartControllerManager starts kube-controller-manager on the cluster
// with the controllers named (e.g. "garbagecollector", "namespace"), as
// the admin, leader election off, serving on a free loopback port; it is
// stopped (before the API server) when the test ends. It fails the test
// when it cannot start.
func (c *Cluster) StartControllerManager(t testing.TB, controllers ...string) {
	t.Helper()
	assets, err := Assets()
	if err != nil {
		t.Fatalf("kube lab: %v", err)
	}
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kube lab: %v (run fleet/kubetest/lab.sh, which builds it)", err)
	}
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	if c.controllers {
		return // StartControllers runs them all
	}
	if err := c.startControllerManager(bin, controllers); err != nil {
		t.Fatalf("kube lab: %v", err)
	}
}

// startControllerManager starts kube-controller-manager with the
// controllers named and the extra flags, on a free port, retrying when
// another process took the port first.
func (c *Cluster) startControllerManager(bin string, controllers []string, extra ...string) error {
	log := filepath.Join(c.Dir, "kube-controller-manager.log")
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := freePorts(1)
		if perr != nil {
			return perr
		}
		args := append([]string{"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false", "--use-service-account-credentials=false",
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(c.Dir, "kcm-certs"),
			"--concurrent-gc-syncs=5", "--profiling=false", "--v=1"}, extra...)
		err = c.run(bin, "kube-controller-manager.log", args...)
		if err != nil {
			break
		}
		// Its serving certificate is its own, self-signed: /healthz is
		// all that is read, on loopback.
		err = waitHTTP(&tls.Config{InsecureSkipVerify: true}, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", "ok", 90*time.Second, c.procs[len(c.procs)-1])
		if err == nil || !strings.Contains(tail(log), "address already in use") {
			break
		}
		c.procs[len(c.procs)-1].stop()
		c.procs = c.procs[:len(c.procs)-1]
	}
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w (log: %s)", err, tail(log))
	}
	return nil
}
